"""ProducerIdControlManager: the cluster-wide producer-id counter (KIP-730).

Every block, whether a broker's or this node's own, comes from the one counter, so blocks
never overlap. A block is [first, first + size - 1]; the record written is the NEXT first id,
and replay refuses one that does not increase, as Kafka does. A snapshot keeps only the
counter, as ProducerIdsRecord{BrokerId -1, BrokerEpoch -1}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kraftpy.controller.cluster_control import ClusterControlManager, ReplayError
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.allocate_producer_ids_response import (
    AllocateProducerIdsResponse,
)
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

INT64_MAX = (1 << 63) - 1
_NONE = ErrorCode.NONE
EXHAUSTED = ("Exhausted all producerIds as the next block's end producerId has exceeded the "
             "int64 type limit")


def _refusal(code: ErrorCode, throttle: int = 0) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(throttle_time_ms=throttle, error_code=code,
                                       producer_id_start=0, producer_id_len=0)


class ProducerIdsExhausted(Exception):
    """The next block would pass the int64 limit; ids never wrap."""


@dataclass
class TokenBucket:
    """Kafka's KIP-599 quota shape: `rate` tokens a second, at most `burst` saved up."""

    rate: float
    burst: float
    tokens: float
    updated_ms: int

    def take(self, now_ms: int) -> int:
        """Spend one token; 0 when allowed, else the ms until one is there (throttle time)."""
        elapsed = max(0, now_ms - self.updated_ms) / 1000.0
        self.tokens = min(self.burst, self.tokens + elapsed * self.rate)
        self.updated_ms = max(self.updated_ms, now_ms)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0
        return max(1, math.ceil(round((1.0 - self.tokens) / self.rate * 1000.0, 6)))


class ProducerIdControlManager:
    def __init__(self, settings: ControllerSettings, cluster: ClusterControlManager) -> None:
        self.settings = settings
        self.cluster = cluster
        self.block_size = settings.producer_id_block_size
        self.next_producer_id = 0  # first id of the next block handed out
        self.issued = False  # any ProducerIdsRecord replayed (else nothing to snapshot)
        # Blocks replayed per broker id (a snapshot's counter record is -1): for the metrics.
        self.granted: dict[int, int] = {}
        self.quotas: dict[int, TokenBucket] = {}  # soft state: per-broker rate limiting

    # --- replay ---------------------------------------------------------------------------

    def replay(self, record: ProducerIdsRecord) -> None:
        if record.next_producer_id <= self.next_producer_id:
            raise ReplayError(f"next producer id {record.next_producer_id} is not greater "
                              f"than current next producer id {self.next_producer_id}")
        self.next_producer_id = record.next_producer_id
        self.issued = True
        try:  # a known broker: one subscript, no call (the path of every block)
            self.granted[record.broker_id] += 1
        except KeyError:
            self.granted[record.broker_id] = 1

    def snapshot_records(self) -> list[tuple[Any, int]]:
        if not self.issued:
            return []
        return [(ProducerIdsRecord(broker_id=-1, broker_epoch=-1,
                                   next_producer_id=self.next_producer_id), 0)]

    # --- commands -------------------------------------------------------------------------

    def generate(self, broker_id: int, broker_epoch: int, first: int | None = None
                 ) -> tuple[int, ProducerIdsRecord]:
        """The next block's first id and the record that claims it (no epoch check). `first`:
        the block after ones generated for the same, not yet replayed, result."""
        if first is None:
            first = self.next_producer_id
        if first > INT64_MAX - self.block_size:
            raise ProducerIdsExhausted(EXHAUSTED)
        return first, ProducerIdsRecord(broker_id=broker_id, broker_epoch=broker_epoch,
                                        next_producer_id=first + self.block_size)

    def allocate(self, request: Any, api_version: int, now_ms: int, next_offset: int,
                 listener: str | None) -> ControllerResult:
        """AllocateProducerIds: a broker's next block, after its epoch and quota checks. Takes
        what every command takes, so the command table holds it as it is (one call less on
        the path every broker's block takes)."""
        broker_id, broker_epoch = request.broker_id, request.broker_epoch
        if self.cluster.check_broker_epoch(broker_id, broker_epoch) is not None:
            return ControllerResult.reply(_refusal(ErrorCode.STALE_BROKER_EPOCH))
        if self.settings.allocate_producer_ids_quota > 0:
            throttle = self._throttle(broker_id, now_ms)
            if throttle:
                return ControllerResult.reply(
                    _refusal(ErrorCode.THROTTLING_QUOTA_EXCEEDED, throttle))
        first, size = self.next_producer_id, self.block_size
        if first > INT64_MAX - size:  # ids never wrap
            result = ControllerResult.reply(_refusal(ErrorCode.UNKNOWN_SERVER_ERROR))
            result.events.append(f"Refused a producer id block to broker {broker_id}: "
                                 f"{EXHAUSTED}")
            return result
        # `generate`, inlined, and `of` for the messages: the path every broker's block takes.
        return ControllerResult(
            AllocateProducerIdsResponse.of(0, _NONE, first, size),
            [(ProducerIdsRecord.of(broker_id, broker_epoch, first + size), 0)],
            None, False,
            [("Producer ids [%d, %d] to broker %d (epoch %d)",
              first, first + size - 1, broker_id, broker_epoch)])

    def _throttle(self, broker_id: int, now_ms: int) -> int:
        rate = self.settings.allocate_producer_ids_quota
        if rate <= 0:
            return 0
        burst = max(1.0, rate * self.settings.quota_window_num
                    * self.settings.quota_window_size_seconds)
        bucket = self.quotas.get(broker_id)
        if bucket is None:
            bucket = self.quotas[broker_id] = TokenBucket(rate, burst, burst, now_ms)
        return bucket.take(now_ms)

    def describe(self) -> dict[str, Any]:
        return {"next_producer_id": self.next_producer_id if self.issued else None,
                "block_size": self.block_size}
