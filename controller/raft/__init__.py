"""Raft for __cluster_metadata-0 (KIP-595, KIP-996, KIP-853): the sans-IO core (`core.py`),
the driver that carries out its actions (`driver.py`) and its trio runner (`runner.py`).
Nothing here knows what the records mean: that is the controller host's (`../host.py`).
"""
