"""Raft for __cluster_metadata-0 (KIP-595), sans-IO: requests and log state in, answers out.

`leader.py` answers observers (brokers) as the leader of a one-voter quorum: Fetch and
FetchSnapshot with Kafka's leader discovery, divergence and snapshot rules.
"""
