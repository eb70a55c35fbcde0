"""Brokers that behave wrongly: faults a kafka link of `support/fault_proxy.py` applies.

Each fault is one thing a broker can get wrong, done to real Kafka traffic between a client
(or another broker) and a real Kafka 4.1 broker:

- `DuplicateRetries`: a retried idempotent batch is appended again (the proxy strips the
  producer id, epoch and sequence from a batch it has forwarded before, so the broker takes
  it as a new plain batch);
- `DropMarkers`: transaction markers are lost (the proxy answers the coordinator's
  WriteTxnMarkers itself, NONE for every partition, and the partition never sees them);
- `RewriteError`: an answer carries another error code than Kafka's (every error code field
  of one API's answers, `from` -> `to`, optionally only for some requests).

`fired` counts what a fault did, so a test can tell a check failed because of it.
"""

from __future__ import annotations

import asyncio
import struct
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import crc32c
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)
from kraftpy.protocol.message import Message
from kraftpy.protocol.record_batch import ATTR_TRANSACTIONAL, RecordBatch

PRODUCE, INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN = 0, 22, 24, 26
WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT, OFFSET_FETCH = 27, 28, 9
_SIZE = struct.Struct(">i")


@dataclass
class Answer:
    """Answer the request here with `response`; the broker never sees it."""

    response: Any


class WireFault:
    """Forward everything unchanged; subclasses change what they name: `apis` are the APIs
    whose requests are decoded for `on_request` (and kept for `on_response`), `answers` the
    APIs whose answers are decoded for `on_response` when `may_change` says the frame might
    need it (a cheap test on the raw bytes: a pipeline of thousands of answers crosses the
    proxy undecoded)."""

    apis: frozenset[int] = frozenset()
    answers: frozenset[int] = frozenset()

    def __init__(self) -> None:
        self.fired = 0

    def may_change(self, frame: bytes) -> bool:
        return True

    def on_request(self, api_key: int, version: int, request: Any) -> Any:
        """None: forward as it came; a request: forward that instead; an Answer: answer it."""
        return None

    def on_response(self, api_key: int, version: int, request: Any, response: Any) -> Any:
        return response


class RewriteError(WireFault):
    """Every error code `from_error` in `api_key`'s answers becomes `to_error` (for requests
    `when` accepts, if given)."""

    def __init__(self, api_key: int, from_error: str, to_error: str,
                 when: Callable[[Any], bool] | None = None) -> None:
        super().__init__()
        self.apis = frozenset({api_key}) if when is not None else frozenset()
        self.answers = frozenset({api_key})
        self.old, self.new = ErrorCode[from_error], ErrorCode[to_error]
        self.when = when
        self._old_bytes = struct.pack(">h", self.old)

    def may_change(self, frame: bytes) -> bool:
        return self._old_bytes in frame

    def on_response(self, api_key: int, version: int, request: Any, response: Any) -> Any:
        if self.when is None or self.when(request):
            self._rewrite(response)
        return response

    def _rewrite(self, message: Any) -> None:
        for name in message.__slots__:
            value = getattr(message, name)
            if name.endswith("error_code") and value == self.old:
                setattr(message, name, int(self.new))
                self.fired += 1
            elif isinstance(value, Message):
                self._rewrite(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, Message):
                        self._rewrite(item)


class DuplicateRetries(WireFault):
    """A broker that appends a retried idempotent batch again."""

    apis = frozenset({PRODUCE})

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[int, int, int, int]] = set()

    def on_request(self, api_key: int, version: int, request: Any) -> Any:
        changed = False
        for topic in request.topic_data:
            for partition in topic.partition_data:
                records = partition.records
                if not records or len(records) < 61:
                    continue
                batch = RecordBatch(records)
                if batch.producer_id < 0 or batch.attributes & ATTR_TRANSACTIONAL:
                    continue
                key = (batch.producer_id, batch.producer_epoch, batch.base_sequence,
                       batch.records_count)
                if key in self.seen:
                    partition.records = strip_producer(records)
                    changed = True
                    self.fired += 1
                self.seen.add(key)
        return request if changed else None


class DropMarkers(WireFault):
    """A broker that loses transaction markers: WriteTxnMarkers for the topics `topics`
    accepts is answered NONE here and never reaches the partition leader."""

    apis = frozenset({WRITE_TXN_MARKERS})

    def __init__(self, topics: Callable[[str], bool]) -> None:
        super().__init__()
        self.topics = topics

    def on_request(self, api_key: int, version: int, request: Any) -> Any:
        from kraftpy.protocol.messages.write_txn_markers_response import (
            WritableTxnMarkerPartitionResult,
            WritableTxnMarkerResult,
            WritableTxnMarkerTopicResult,
            WriteTxnMarkersResponse,
        )

        if not all(self.topics(t.name) for m in request.markers for t in m.topics):
            return None
        self.fired += 1
        return Answer(WriteTxnMarkersResponse(markers=[WritableTxnMarkerResult(
            producer_id=m.producer_id, topics=[WritableTxnMarkerTopicResult(
                name=t.name, partitions=[WritableTxnMarkerPartitionResult(
                    partition_index=p, error_code=0) for p in t.partition_indexes])
                for t in m.topics]) for m in request.markers]))


def strip_producer(records: bytes) -> bytes:
    """The batch as a plain one: producer id -1, epoch -1, sequence -1, CRC made again."""
    out = bytearray(records)
    struct.pack_into(">qhi", out, 43, -1, -1, -1)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def _produce_acks(frame: bytes, body: int, version: int) -> int:
    """acks of a Produce request frame, read without decoding the records."""
    if version >= 9:  # compact nullable string: uvarint length + 1
        n, shift, length = 0, 0, 0
        while True:
            b = frame[body + n]
            length |= (b & 0x7F) << shift
            n += 1
            if b < 0x80:
                break
            shift += 7
        pos = body + n + max(length - 1, 0)
    else:
        (length,) = struct.unpack_from(">h", frame, body)
        pos = body + 2 + max(length, 0)
    return struct.unpack_from(">h", frame, pos)[0]


class _Pending:
    __slots__ = ("api_key", "version", "request", "fault", "answer")

    def __init__(self, api_key: int, version: int, request: Any, fault: Any) -> None:
        self.api_key, self.version, self.request, self.fault = api_key, version, request, fault
        self.answer: bytes | None = None

    def rewrites(self, frame: bytes) -> bool:
        fault = self.fault
        return fault is not None and self.api_key in fault.answers and fault.may_change(frame)


class KafkaPipe:
    """One connection through a kafka link: requests in order, answers in the same order."""

    def __init__(self, link: Any, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        self.link = link
        self.reader, self.writer = reader, writer
        self.up_reader, self.up_writer = up_reader, up_writer
        self.pending: deque[_Pending] = deque()

    async def run(self) -> None:
        try:
            await asyncio.gather(self._requests(), self._answers())
        except (OSError, asyncio.IncompleteReadError, DecodeError, ConnectionError):
            pass
        finally:
            for w in (self.writer, self.up_writer):
                self.link.writers.discard(w)
                with suppress(Exception):
                    w.close()

    @staticmethod
    async def _frame(reader: asyncio.StreamReader) -> bytes | None:
        try:
            head = await reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return None
        return await reader.readexactly(_SIZE.unpack(head)[0])

    async def _requests(self) -> None:
        try:
            while not self.link.cut:
                frame = await self._frame(self.reader)
                if frame is None:
                    break
                header, api_key, version, body = read_request_header(frame)
                fault = self.link.fault
                request = None
                if fault is not None and api_key in fault.apis:
                    header, request = decode_request(frame)
                    verdict = fault.on_request(api_key, version, request)
                    if isinstance(verdict, Answer):
                        entry = _Pending(api_key, version, request, None)
                        entry.answer = encode_response(header.correlation_id, api_key, version,
                                                       verdict.response)
                        self.pending.append(entry)
                        self._flush()
                        continue
                    if verdict is not None:
                        frame = encode_request(verdict, version, header.correlation_id,
                                               header.client_id)[4:]
                if not (api_key == PRODUCE and _produce_acks(frame, body, version) == 0):
                    self.pending.append(_Pending(api_key, version, request, fault))
                self.up_writer.write(_SIZE.pack(len(frame)) + frame)
                await self.up_writer.drain()
        finally:
            with suppress(Exception):
                self.up_writer.close()

    async def _answers(self) -> None:
        try:
            while not self.link.cut:
                frame = await self._frame(self.up_reader)
                if frame is None:
                    break
                entry = next((e for e in self.pending if e.answer is None), None)
                if entry is None:  # an answer to nothing: pass it on, the client will judge
                    self.writer.write(_SIZE.pack(len(frame)) + frame)
                    continue
                if entry.rewrites(frame):
                    correlation, response = decode_response(frame, entry.api_key, entry.version)
                    response = entry.fault.on_response(entry.api_key, entry.version,
                                                       entry.request, response)
                    entry.answer = encode_response(correlation, entry.api_key, entry.version,
                                                   response)
                else:
                    entry.answer = _SIZE.pack(len(frame)) + frame
                self._flush()
                await self.writer.drain()
        finally:
            with suppress(Exception):
                self.writer.close()

    def _flush(self) -> None:
        while self.pending and self.pending[0].answer is not None:
            self.writer.write(self.pending.popleft().answer)  # type: ignore[arg-type]
