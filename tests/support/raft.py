"""Raft requests as a broker (an observer) sends them, for the raft tests."""

from __future__ import annotations

import uuid

from kraftpy.controller.raft.messages import METADATA_TOPIC_ID
from kraftpy.protocol.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ReplicaState,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def fetch(offset: int, *, epoch: int = 3, last_epoch: int = 3, cluster: str | None = CLUSTER,
          topic_id: uuid.UUID = METADATA_TOPIC_ID, max_wait: int = 500, replica: int = 7,
          hwm: int = 2**63 - 1) -> FetchRequest:
    return FetchRequest(
        cluster_id=cluster, replica_state=ReplicaState(replica_id=replica, replica_epoch=-1),
        max_wait_ms=max_wait, min_bytes=0, max_bytes=8 << 20,
        topics=[FetchTopic(topic_id=topic_id, partitions=[FetchPartition(
            partition=0, current_leader_epoch=epoch, fetch_offset=offset,
            last_fetched_epoch=last_epoch, log_start_offset=-1, partition_max_bytes=0,
            high_watermark=hwm)])])
