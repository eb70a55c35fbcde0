"""ProducerIdManager: the id blocks this node hands to its own InitProducerId clients.

It takes blocks from the same counter as the brokers do (a ProducerIdsRecord with this node's
id), and a block becomes usable only once that record is durable. Which ids of a block were
handed out is volatile on purpose, as in a Kafka broker: after a restart this is empty and
the node claims a fresh block, so no id is ever handed out twice. A block is claimed once the
ids left (in the current block, the ready ones and those claimed but not yet durable) fall to
the low-water mark: at first Kafka's rule (`prefetch_ratio` of one block used), at least doubled (by a block or more)
each time a request finds no id ready (a load that outruns the fsync of a claim), up to
`max_reserve_blocks`; as many blocks are claimed at once as that mark asks for.
A request that finds none ready is answered COORDINATOR_LOAD_IN_PROGRESS (retriable), never
NOT_COORDINATOR. A node with no client listener (a controller-only node) claims no block.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

NOT_READY = -1  # take: no id until the pending claim is committed


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
    def __init__(self, node_id: int, block_size: int, prefetch_ratio: float,
                 max_reserve_blocks: int = 16, *, enabled: bool = True) -> None:
        self.node_id = node_id
        # A node without a client listener answers no InitProducerId, so it claims nothing.
        self.enabled = enabled
        self.block_size = block_size
        self.prefetch_at = max(1, int(block_size * prefetch_ratio))
        self.low_water = block_size - self.prefetch_at  # ids left that make a claim due
        self.max_low_water = max(self.low_water, max_reserve_blocks * block_size)
        self.current: Block | None = None
        self.ready: deque[Block] = deque()  # durable blocks after the current one
        self.claims: deque[Claim] = deque()  # claiming records not yet committed, in order
        self.exhausted = False  # the cluster counter ran out: no id will ever be ready
        self._dry_claim: Claim | None = None  # the claim a request last waited for
        self.usable_blocks = 0  # blocks that became usable: ids handed out, for the metrics

    @property
    def next_block(self) -> Block | None:
        return self.ready[0] if self.ready else None

    def next_id(self) -> int | None:
        """A fresh producer id, or None while no durable block is ready."""
        while (self.current is None or self.current.exhausted) and self.ready:
            self.current = self.ready.popleft()
        if self.current is None or self.current.exhausted:
            if self.claims:
                self._ran_dry()
            return None
        pid = self.current.next_id
        self.current.next_id += 1
        return pid

    def take(self, count: int) -> tuple[int, int] | None:
        """Up to `count` fresh ids for idempotent InitProducerIds, one request after another,
        while that leaves `wants_block()` false and needs no block switch (the usual case):
        (first, how many), the ids first .. first + how many - 1 now handed out; or
        (NOT_READY, count) while the claimed block's record waits for its fsync (every one of
        them answers COORDINATOR_LOAD_IN_PROGRESS); or None, and nothing changed: the
        controller decides (a claim, a block switch). One request (`count` 1) or a run of
        them (the quick answers) alike."""
        cur = self.current
        if cur is None or cur.next_id - cur.first >= cur.size:
            return (NOT_READY, count) if self._waiting_on_full_claim() else None
        end = cur.first + cur.size
        if not self.exhausted:  # an id leaving low_water or fewer would make a claim due
            end = min(end, end - 1 + (len(self.ready) + len(self.claims)) * self.block_size
                      - self.low_water)
        first = cur.next_id
        given = min(count, end - first)
        if given <= 0:
            return None
        cur.next_id = first + given
        return first, given

    def _waiting_on_full_claim(self) -> bool:
        """No id is usable, and the claim that ran dry already asks for the whole reserve:
        nothing but its fsync can help, so the answer is NOT_READY without a new claim."""
        claims = self.claims
        return (not self.ready and bool(claims) and not self.exhausted
                and self._dry_claim is claims[0]
                and len(claims) * self.block_size > self.low_water)

    def _ran_dry(self) -> None:
        """A request found no id ready: keep a larger reserve (once per claim)."""
        if self._dry_claim is not self.claims[0]:
            self._dry_claim = self.claims[0]
            grown = max(2 * self.low_water, self.low_water + self.block_size)
            self.low_water = min(grown, self.max_low_water)

    def ids_left(self) -> int:
        """Ids not handed out yet: the current block's, the ready blocks' and the claimed."""
        cur = self.current
        left = cur.first + cur.size - cur.next_id if cur is not None else 0
        return max(left, 0) + (len(self.ready) + len(self.claims)) * self.block_size

    def wants_block(self) -> bool:
        return self.enabled and not self.exhausted and self.ids_left() <= self.low_water

    def claimed(self, offset: int) -> None:
        """A claiming record will be written at `offset`."""
        self.claims.append(Claim(offset))

    def on_replay(self, record: ProducerIdsRecord, offset: int) -> None:
        if record.broker_id != self.node_id:
            return
        for claim in self.claims:
            if claim.offset == offset:
                claim.first = record.next_producer_id - self.block_size
                return

    def on_committed(self, hwm: int) -> None:
        claims = self.claims
        while claims and claims[0].offset < hwm:
            claim = claims.popleft()
            if claim.first is None:  # the record never made it into the log; claim again
                continue
            block = Block(claim.first, self.block_size, claim.first)
            self.usable_blocks += 1
            if self.current is None or self.current.exhausted:
                self.current = block
            else:
                self.ready.append(block)

    def describe(self) -> dict[str, Any]:
        cur = self.current
        return {"own_block": [cur.first, cur.first + cur.size - 1] if cur else None,
                "own_next_id": cur.next_id if cur and not cur.exhausted else None,
                "own_next_block": ([self.next_block.first,
                                    self.next_block.first + self.block_size - 1]
                                   if self.next_block else None),
                "own_ready_blocks": len(self.ready),
                "own_claim_pending": bool(self.claims)}
