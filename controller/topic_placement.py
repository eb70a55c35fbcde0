"""Replica placement as Kafka's StripedReplicaPlacer does it.

Brokers are grouped by rack (no rack is a rack of its own, sorted first); each partition's
leader is the next unfenced broker of the next rack, round robin from a random start, and the
other replicas come from the following racks in turn, unfenced brokers before fenced ones.
After every unfenced broker has led once, racks and brokers are shuffled, so leaders and
followers spread evenly without a fixed pattern. Brokers in controlled shutdown are left out;
fenced ones may hold replicas but never lead a new partition.

The random source is passed in: the controller gives a seeded one in tests, so placements can
be checked exactly; Kafka's own choices (java.util.Random) are not reproduced, only the shape.
"""

from __future__ import annotations

import random as _random
from collections.abc import Iterable
from dataclasses import dataclass, field


class InvalidReplicationFactor(ValueError):
    """Kafka's InvalidReplicationFactorException, with its message."""


@dataclass(frozen=True)
class UsableBroker:
    broker_id: int
    rack: str | None
    fenced: bool


@dataclass
class _BrokerList:
    brokers: list[int] = field(default_factory=list)
    epoch: int = 0
    index: int = 0
    offset: int = 0

    def initialize(self, rng: _random.Random) -> None:
        if self.brokers:
            self.brokers.sort()
            self.offset = rng.randrange(len(self.brokers))

    def next(self, epoch: int) -> int:
        if not self.brokers:
            return -1
        if self.epoch != epoch:
            self.epoch = epoch
            self.index = 0
            self.offset = (self.offset + 1) % len(self.brokers)
        if self.index >= len(self.brokers):
            return -1
        broker = self.brokers[(self.index + self.offset) % len(self.brokers)]
        self.index += 1
        return broker


@dataclass
class _Rack:
    fenced: _BrokerList = field(default_factory=_BrokerList)
    unfenced: _BrokerList = field(default_factory=_BrokerList)

    def next(self, epoch: int) -> int:
        result = self.unfenced.next(epoch)
        return result if result >= 0 else self.fenced.next(epoch)


class _RackList:
    def __init__(self, rng: _random.Random, brokers: Iterable[UsableBroker]) -> None:
        self.rng = rng
        self.racks: dict[str | None, _Rack] = {}
        self.total = self.unfenced = 0
        for b in brokers:
            rack = self.racks.setdefault(b.rack, _Rack())
            (rack.fenced if b.fenced else rack.unfenced).brokers.append(b.broker_id)
            self.unfenced += not b.fenced
            self.total += 1
        for rack in self.racks.values():
            rack.fenced.initialize(rng)
            rack.unfenced.initialize(rng)
        self.names = sorted(self.racks, key=lambda n: (n is not None, n or ""))
        self.epoch = 0
        self.offset = rng.randrange(len(self.names)) if self.names else 0

    def place(self, replication_factor: int) -> list[int]:
        check(replication_factor, self.total, self.unfenced)
        if self.epoch == self.unfenced and self.unfenced > 1:
            self._shuffle()
            self.epoch = 0
        if self.offset == len(self.names):
            self.offset = 0
        out: list[int] = []
        first = self.offset
        while True:  # the leader: an unfenced broker, from this rack or the next with one
            result = self.racks[self.names[first]].unfenced.next(self.epoch)
            if result >= 0:
                out.append(result)
                break
            first = (first + 1) % len(self.names)
        index = self.offset
        for _ in range(1, replication_factor):
            result = -1
            while result < 0:
                if index == first:
                    first = -1  # the leader's rack gave its broker: skip it once
                else:
                    result = self.racks[self.names[index]].next(self.epoch)
                index = (index + 1) % len(self.names)
            out.append(result)
        self.epoch += 1
        self.offset += 1
        return out

    def _shuffle(self) -> None:
        self.rng.shuffle(self.names)
        for rack in self.racks.values():
            self.rng.shuffle(rack.fenced.brokers)
            self.rng.shuffle(rack.unfenced.brokers)


def check(replication_factor: int, total: int, unfenced: int) -> None:
    if replication_factor <= 0:
        raise InvalidReplicationFactor(f"Invalid replication factor {replication_factor}: the "
                                       "replication factor must be positive.")
    if unfenced == 0:
        raise InvalidReplicationFactor("All brokers are currently fenced.")
    if replication_factor > total:
        raise InvalidReplicationFactor(
            f"The target replication factor of {replication_factor} cannot be reached because "
            f"only {total} broker(s) are registered.")


def place(brokers: Iterable[UsableBroker], num_partitions: int, replication_factor: int,
          rng: _random.Random) -> list[list[int]]:
    """Replicas for `num_partitions` new partitions (leader first); InvalidReplicationFactor
    when the usable brokers cannot hold them."""
    racks = _RackList(rng, brokers)
    check(replication_factor, racks.total, racks.unfenced)
    return [racks.place(replication_factor) for _ in range(num_partitions)]
