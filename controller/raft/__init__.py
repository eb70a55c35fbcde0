"""Raft for __cluster_metadata-0 (KIP-595, KIP-996, KIP-853): the sans-IO core (`core.py`)
and the trio shell that runs it on every node (`shell.py`), a lone voter's too.
"""
