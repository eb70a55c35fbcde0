"""ProducerIdManager: the id blocks this node hands to its own InitProducerId clients.

It takes blocks from the same counter as the brokers do (a ProducerIdsRecord with this node's
id), and a block becomes usable only once that record is durable. Which ids of a block were
handed out is volatile on purpose, as in a Kafka broker: after a restart this is empty and
the node claims a fresh block, so no id is ever handed out twice. The next block is claimed
once `prefetch_ratio` of the current one is used, so a request rarely finds none ready; when
it does, the answer is COORDINATOR_LOAD_IN_PROGRESS (retriable), never NOT_COORDINATOR.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

NOT_READY = -1  # next_quiet_id: no id until the pending claim is committed


@dataclass
class Block:
    first: int
    size: int
    next_id: int

    @property
    def used(self) -> int:
        return self.next_id - self.first

    @property
    def exhausted(self) -> bool:
        return self.used >= self.size


@dataclass
class Claim:
    offset: int  # where the claiming ProducerIdsRecord was written
    first: int | None = None  # set when that record is replayed


class ProducerIdManager:
    def __init__(self, node_id: int, block_size: int, prefetch_ratio: float) -> None:
        self.node_id = node_id
        self.block_size = block_size
        self.prefetch_at = max(1, int(block_size * prefetch_ratio))
        self.current: Block | None = None
        self.next_block: Block | None = None
        self.claim: Claim | None = None
        self.exhausted = False  # the cluster counter ran out: no id will ever be ready

    def next_id(self) -> int | None:
        """A fresh producer id, or None while no durable block is ready."""
        if (self.current is None or self.current.exhausted) and self.next_block is not None:
            self.current, self.next_block = self.next_block, None
        if self.current is None or self.current.exhausted:
            return None
        pid = self.current.next_id
        self.current.next_id += 1
        return pid

    def next_quiet_id(self) -> int | None:
        """`next_id()` when that leaves `wants_block()` false and needs no block switch (the
        usual case, which the controller answers without looking further): a fresh id, or
        NOT_READY while the claimed block's record waits for its fsync. Otherwise None, and
        nothing has changed."""
        cur = self.current
        if cur is None or cur.next_id - cur.first >= cur.size:
            if self.next_block is None and self.claim is not None and not self.exhausted:
                return NOT_READY
            return None
        pid = cur.next_id
        if pid + 1 - cur.first >= self.prefetch_at and self.claim is None \
                and self.next_block is None and not self.exhausted:
            return None
        cur.next_id = pid + 1
        return pid

    def wants_block(self) -> bool:
        if self.claim is not None or self.next_block is not None or self.exhausted:
            return False
        return self.current is None or self.current.used >= self.prefetch_at

    def claimed(self, offset: int) -> None:
        """A claiming record will be written at `offset`."""
        self.claim = Claim(offset)

    def on_replay(self, record: ProducerIdsRecord, offset: int) -> None:
        if self.claim is not None and offset == self.claim.offset \
                and record.broker_id == self.node_id:
            self.claim.first = record.next_producer_id - self.block_size

    def on_committed(self, hwm: int) -> None:
        claim = self.claim
        if claim is None or hwm <= claim.offset:
            return
        self.claim = None
        if claim.first is None:  # the record never made it into the log; claim again
            return
        block = Block(claim.first, self.block_size, claim.first)
        if self.current is None or self.current.exhausted:
            self.current = block
        else:
            self.next_block = block

    def describe(self) -> dict[str, Any]:
        cur = self.current
        return {"own_block": [cur.first, cur.first + cur.size - 1] if cur else None,
                "own_next_id": cur.next_id if cur and not cur.exhausted else None,
                "own_next_block": ([self.next_block.first,
                                    self.next_block.first + self.block_size - 1]
                                   if self.next_block else None),
                "own_claim_pending": self.claim is not None}
