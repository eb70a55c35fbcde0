"""What the decoder yields: batches, records and problems, each knowing its file and place.

These are the decoder's own views, flat and cheap, so every consumer (the text dump, JSON
lines, the audit, Spark rows) reads the same fields with the same meaning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(slots=True)
class BatchInfo:
    """One v2 record batch header, with where it sits in the file."""

    position: int
    base_offset: int
    last_offset_delta: int
    partition_leader_epoch: int
    magic: int
    crc: int
    crc_valid: bool
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    size: int  # whole batch, offset and length fields included

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> str:
        code = self.attributes & 0x07
        return COMPRESSION_NAMES[code] if code < len(COMPRESSION_NAMES) else f"unknown({code})"

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & 0x08 else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & 0x40 else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


@dataclass(slots=True)
class RecordInfo:
    """One record and what its value decoded to.

    `kind` is "metadata" (a framed metadata record), "control" (a control record), "txn" (a
    __transaction_state key/value), "offsets" (a __consumer_offsets key/value), "coordinator"
    (a record type neither coordinator log knows), "data" (an ordinary topic's key and value
    as text) or "raw" (not decoded). `type_name` is Kafka's name for the type:
    PRODUCER_IDS_RECORD, the control type (LeaderChange, SnapshotHeader, ...), the
    coordinator record type (TRANSACTION_LOG, OFFSET_COMMIT, ..., UNKNOWN_<id>) or DATA.
    `data` is the JSON form (the value's text for "data"), `key_data` the key's;
    `error` is set when the record did not decode.
    """

    offset: int
    timestamp: int
    key_size: int
    value_size: int
    sequence: int
    header_keys: list[str]
    kind: str
    type_name: str = ""
    type_id: int = -1
    version: int = -1
    data: Any = None
    json: str | None = None  # `data` as compact JSON text (what the dump and the rows print)
    key_data: Any = None
    error: str = ""
    record: Any = field(default=None, repr=False)  # the decoded object, for replay


@dataclass(slots=True)
class Problem:
    """Damage found while reading: the file, where, and what. Reading goes on after it."""

    path: str
    position: int
    kind: str  # crc, torn-tail, trailing-bytes, undecodable-record, bad-batch, not-a-log, io
    message: str
    offset: int | None = None


def batch_info(batch: Any) -> BatchInfo:
    """The header of a `kraftpy.protocol.record_batch.RecordBatch` view."""
    return BatchInfo(
        position=batch.position,
        base_offset=batch.base_offset,
        last_offset_delta=batch.last_offset_delta,
        partition_leader_epoch=batch.partition_leader_epoch,
        magic=batch.magic,
        crc=batch.crc,
        crc_valid=batch.crc_valid(),
        attributes=batch.attributes,
        base_timestamp=batch.base_timestamp,
        max_timestamp=batch.max_timestamp,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        record_count=batch.records_count,
        size=batch.size,
    )
