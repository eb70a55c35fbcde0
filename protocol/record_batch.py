"""Kafka's v2 record batch (magic 2): build it, walk a buffer of them, decode records lazily.

Layout (all big-endian; see Kafka's DefaultRecordBatch):

    0 BaseOffset int64 | 8 Length int32 | 12 PartitionLeaderEpoch int32 | 16 Magic int8 |
    17 CRC uint32 (CRC-32C over [21, end)) | 21 Attributes int16 | 23 LastOffsetDelta int32 |
    27 BaseTimestamp int64 | 35 MaxTimestamp int64 | 43 ProducerId int64 |
    51 ProducerEpoch int16 | 53 BaseSequence int32 | 57 RecordsCount int32 | 61 records

Each record is `Length varint | Attributes int8 | TimestampDelta varlong | OffsetDelta varint |
KeyLength varint | Key | ValueLength varint | Value | HeaderCount varint | headers`, with
zig-zag varints. Walking a log must be cheap, so a `RecordBatch` is only a view: its header is
unpacked once with one `struct` call, and records are decoded when asked for, straight into
lists of bytes, without an object per record unless `records()` is called.

Every malformed byte raises `DecodeError` whose `offset` is the position of the batch in its
file (the buffer position plus the caller's `position`), so a log can name file and offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import crc32c
from kraftpy.protocol.compression import CODEC_NAMES, DecompressError, decompress
from kraftpy.protocol.errors import DecodeError, EncodeError

__all__ = [
    "ATTR_CONTROL",
    "ATTR_TRANSACTIONAL",
    "BATCH_HEADER",
    "CorruptBatchError",
    "LOG_OVERHEAD",
    "MAGIC",
    "RECORD_BATCH_OVERHEAD",
    "Record",
    "RecordBatch",
    "TruncatedBatchError",
    "build_record_batch",
    "decode_varint",
    "encode_varint",
    "frame_records",
    "iter_record_batches",
    "kraft_record_head",
    "offset_delta_varints",
]

MAGIC = 2
LOG_OVERHEAD = 12  # BaseOffset + Length: the bytes not counted by Length
RECORD_BATCH_OVERHEAD = 61
CRC_START = 21
COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40
COMPRESSION_NAMES = CODEC_NAMES

BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qi")  # BaseOffset, Length
_CRC_PART = struct.Struct(">hiqqqhii")  # Attributes .. RecordsCount (40 bytes)
_LEADING = struct.Struct(">qiibI")  # BaseOffset, Length, PartitionLeaderEpoch, Magic, CRC
_SMALL_RECORD = struct.Struct(">6B")  # a record's first six bytes, when each is a whole varint
assert BATCH_HEADER.size == RECORD_BATCH_OVERHEAD


class TruncatedBatchError(DecodeError):
    """The buffer ends inside a batch: what a torn write at the end of a log looks like."""


class CorruptBatchError(DecodeError):
    """A batch whose bytes are all there but wrong: bad length, magic, CRC or record layout."""


_tuple_new = tuple.__new__


class Record(NamedTuple):
    """One record, materialised on request (the log reads values without it)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


# ---------------------------------------------------------------------------------------------
# zig-zag varints (signed; the record format's, unlike the uvarint of flexible messages)

_SMALL_VARINTS = [bytes([((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF]) for v in range(-64, 64)]


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong of a signed 64-bit value."""
    if -64 <= value < 64:
        return _SMALL_VARINTS[value + 64]
    if not -(1 << 63) <= value < (1 << 63):
        raise EncodeError(f"varlong out of int64 range: {value}")
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_varint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Zig-zag varint at `pos` -> (value, next position); at most 10 bytes (a varlong)."""
    n = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint longer than 10 bytes", offset=pos)


def _uvarint_tail(data: bytes, pos: int, first: int) -> tuple[int, int]:
    # The multi-byte case of the inlined fast path below; `pos` is just past `first`.
    n = first & 0x7F
    shift = 7
    while True:
        b = data[pos]
        pos += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


# ---------------------------------------------------------------------------------------------
# building


def _record_bytes(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> bytes:
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta)]
    if key is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(key)))
        parts.append(key)
    if value is None:
        parts.append(b"\x01")
    else:
        parts.append(encode_varint(len(value)))
        parts.append(value)
    if headers:
        parts.append(encode_varint(len(headers)))
        for hkey, hvalue in headers:
            raw = hkey.encode("utf-8")
            parts.append(encode_varint(len(raw)))
            parts.append(raw)
            if hvalue is None:
                parts.append(b"\x01")
            else:
                parts.append(encode_varint(len(hvalue)))
                parts.append(bytes(hvalue))
    else:
        parts.append(b"\x00")
    body = b"".join(parts)
    return encode_varint(len(body)) + body


_TABLE_SIZE = 1 << 16
_table: list[bytes] = []
# Offset deltas by the width of their zig-zag varint: (first, past the last, width).
_DELTA_WIDTHS = ((0, 64, 1), (64, 1 << 13, 2), (1 << 13, 1 << 20, 3), (1 << 20, 1 << 27, 4),
                 (1 << 27, 1 << 31, 5))


def offset_delta_varints() -> list[bytes]:
    """The zig-zag varints of 0 .. 65535 (2v, in one to three bytes), built at first use from
    byte strings repeated and cut, not one by one: a node's first snapshot pays for it."""
    if not _table:
        _table.extend(bytes((2 * v,)) for v in range(64))
        _table.extend(bytes(((2 * v) & 0x7F | 0x80, (2 * v) >> 7)) for v in range(64, 8192))
        # 8192 .. 65535: the low seven bits of 2v cycle every 64 values, the middle seven
        # every 8192 (each held for 64), the top byte counts the 8192s.
        count = _TABLE_SIZE - 8192
        low = bytes(range(0x80, 0x100, 2)) * (count // 64)
        middle = bytes(0x80 | m for m in range(128) for _ in range(64)) * (count // 8192)
        top = b"".join(bytes((t,)) * 8192 for t in range(1, 8))
        packed = bytearray(3 * count)
        packed[0::3], packed[1::3], packed[2::3] = low, middle, top
        flat = bytes(packed)
        _table.extend(flat[i:i + 3] for i in range(0, 3 * count, 3))
    return _table


# A KRaft-shaped record's head around its offset delta, by the delta's varint width, then by
# value length (lengths under 4 KiB are kept: a log's records have a few hundred lengths).
_HEADS: tuple[dict[int, tuple[bytes, bytes]], ...] = tuple({} for _ in range(6))
_HEAD_LENGTHS = 1 << 12


def kraft_record_head(value_length: int, delta_width: int) -> tuple[bytes, bytes]:
    """What a KRaft-shaped record (attributes 0, timestamp delta 0, null key, no headers)
    holds around its offset delta: the previous record's header count (0) and this record's
    length, attributes and timestamp delta before it; the key length (-1) and the value
    length after it. Only the value length and the offset delta's width decide them."""
    found = _HEADS[delta_width].get(value_length)
    if found is not None:
        return found
    value_varint = encode_varint(value_length)
    length = 2 + delta_width + 1 + len(value_varint) + value_length + 1
    pair = b"\x00" + encode_varint(length) + b"\x00\x00", b"\x01" + value_varint
    if value_length < _HEAD_LENGTHS:
        _HEADS[delta_width][value_length] = pair
    return pair


def _kraft_records(values: Sequence[bytes]) -> bytes:
    """The records of a KRaft-shaped batch of non-null values: each is its head, its value
    and an empty header count. A record's head is the same for every value of one length
    while its offset delta's varint keeps one width, so it is made once per length and
    width, not once per record (a node's first snapshot would otherwise make 100,000)."""
    table = _table or offset_delta_varints()
    count = len(values)
    parts: list[bytes] = []
    append = parts.append
    for first, past, width in _DELTA_WIDTHS:
        if first >= count:
            break
        if count <= past and first == 0:  # one width (zip stops at the last value)
            deltas, run = table, values
        else:
            past = min(past, count)
            run = values[first:past]
            deltas = (table[first:past] if past <= _TABLE_SIZE
                      else map(encode_varint, range(first, past)))
        get = _HEADS[width].get
        for delta, value in zip(deltas, run, strict=False):  # deltas may run past
            size = len(value)
            pair = get(size)
            if pair is None:
                pair = kraft_record_head(size, width)
            lead, trail = pair
            append(lead)
            append(delta)
            append(trail)
            append(value)
    parts[0] = parts[0][1:]  # the first record has no record before it
    append(b"\x00")
    return b"".join(parts)


def build_record_batch(
    values: Sequence[bytes | None],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = 0,
    timestamp: int = 0,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[Sequence[tuple[str, bytes | None]]] | None = None,
    timestamps: Sequence[int] | None = None,
    control: bool = False,
    transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """One uncompressed v2 batch of `values` at `base_offset`, CreateTime.

    The defaults are how KRaft writes its log: null keys, no headers, no producer, one
    timestamp for every record. `timestamps` (one per record) overrides `timestamp`.
    """
    count = len(values)
    if count == 0:
        raise EncodeError("a record batch needs at least one record")
    if keys is not None and len(keys) != count:
        raise EncodeError(f"{len(keys)} keys for {count} values")
    if headers is not None and len(headers) != count:
        raise EncodeError(f"{len(headers)} header lists for {count} values")
    if timestamps is not None:
        if len(timestamps) != count:
            raise EncodeError(f"{len(timestamps)} timestamps for {count} values")
        base_ts = timestamps[0]
        max_ts = max(timestamps)
    else:
        base_ts = max_ts = timestamp

    records = b""
    if keys is None and headers is None and timestamps is None:
        # KRaft's shape: attributes 0, timestamp delta 0, null key, no headers. A null value
        # (KRaft never writes one) has no length: such a batch takes the general road.
        try:
            records = _kraft_records(values)  # type: ignore[arg-type]
        except TypeError:
            pass
    if not records:
        records = b"".join(
            _record_bytes(
                i,
                (timestamps[i] - base_ts) if timestamps is not None else 0,
                keys[i] if keys is not None else None,
                values[i],
                headers[i] if headers is not None else None,
            )
            for i in range(count)
        )

    attributes = (ATTR_CONTROL if control else 0) | (ATTR_TRANSACTIONAL if transactional else 0)
    return _frame(records, count, base_offset, partition_leader_epoch, attributes, base_ts,
                  max_ts, producer_id, producer_epoch, base_sequence)


def frame_records(records: bytes, count: int, *, base_offset: int, partition_leader_epoch: int,
                  timestamp: int) -> bytes:
    """A KRaft data batch (no producer, one timestamp) around `count` records already
    encoded (`kraft_batches.KraftBatches` builds them)."""
    return _frame(records, count, base_offset, partition_leader_epoch, 0, timestamp, timestamp,
                  -1, -1, -1)


def _frame(records: bytes, count: int, base_offset: int, partition_leader_epoch: int,
           attributes: int, base_ts: int, max_ts: int, producer_id: int, producer_epoch: int,
           base_sequence: int) -> bytes:
    try:
        tail = _CRC_PART.pack(attributes, count - 1, base_ts, max_ts, producer_id,
                              producer_epoch, base_sequence, count)
        length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records)
        crc = crc32c.crc32c(records, crc32c.crc32c(tail))
        head = _LEADING.pack(base_offset, length, partition_leader_epoch, MAGIC, crc)
    except struct.error as exc:
        raise EncodeError(f"record batch header field out of range: {exc}") from None
    return b"".join((head, tail, records))


# ---------------------------------------------------------------------------------------------
# reading


def _field(index: int) -> property:
    return property(lambda self: self.header[index])


class RecordBatch:
    """A view of one batch inside a buffer; `position` is its offset in the file it came from.

    The header fields are read-only properties over one unpacked tuple, which keeps walking a
    log of small batches cheap.
    """

    __slots__ = ("buffer", "start", "position", "header")

    def __init__(self, buffer: bytes, start: int = 0, position: int | None = None) -> None:
        """Unpack the header at `buffer[start:]`; no validation (see `iter_record_batches`)."""
        self.buffer = buffer
        self.start = start
        self.position = start if position is None else position
        self.header: tuple[int, ...] = BATCH_HEADER.unpack_from(buffer, start)

    base_offset = _field(0)
    length = _field(1)
    partition_leader_epoch = _field(2)
    magic = _field(3)
    crc = _field(4)
    attributes = _field(5)
    last_offset_delta = _field(6)
    base_timestamp = _field(7)
    max_timestamp = _field(8)
    producer_id = _field(9)
    producer_epoch = _field(10)
    base_sequence = _field(11)
    records_count = _field(12)

    # --- header-derived ---
    @property
    def size(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def end(self) -> int:
        """Index just past this batch in `buffer`."""
        return self.start + self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    def raw(self) -> bytes:
        """The batch's bytes exactly as stored."""
        return bytes(self.buffer[self.start : self.end])

    def compute_crc(self) -> int:
        return crc32c.crc32c(memoryview(self.buffer)[self.start + CRC_START : self.end])

    def crc_valid(self) -> bool:
        return self.compute_crc() == self.crc

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, epoch={self.partition_leader_epoch}, "
            f"position={self.position}, size={self.size}, control={self.is_control})"
        )

    # --- records ---
    def _records_region(self) -> tuple[bytes, int, int]:
        begin = self.start + RECORD_BATCH_OVERHEAD
        end = self.end
        codec = self.attributes & COMPRESSION_MASK
        if codec == 0:
            return self.buffer, begin, end
        try:
            plain = decompress(codec, bytes(self.buffer[begin:end]))
        except DecompressError as exc:
            raise self._error(str(exc)) from None
        return plain, 0, len(plain)

    def _error(self, message: str) -> CorruptBatchError:
        return CorruptBatchError(
            f"batch at base offset {self.base_offset}: {message}", offset=self.position
        )

    def values(self) -> list[bytes | None]:
        """Every record value, in order: the fast path of log replay."""
        h = self.header
        if h[5] & COMPRESSION_MASK:
            data, pos, end = self._records_region()
        else:
            data = self.buffer
            pos = self.start + RECORD_BATCH_OVERHEAD
            end = self.start + LOG_OVERHEAD + h[1]
        out: list[bytes | None] = []
        append = out.append
        small = _SMALL_RECORD.unpack_from
        try:
            for _ in range(h[12]):
                # KRaft's small records (every varint one byte, null key, no headers): one unpack
                # reads length, attributes, both deltas, key and value lengths.
                if pos + 6 <= end:
                    rl, _attrs, ts, od, kl, vl = small(data, pos)
                    if kl == 1 and (rl | ts | od | vl) < 0x80 and not (rl | vl) & 1:
                        vend = pos + 6 + (vl >> 1)
                        rec_end = pos + 1 + (rl >> 1)
                        if vend + 1 == rec_end <= end and data[vend] == 0:
                            append(data[pos + 6 : vend])
                            pos = rec_end
                            continue
                # Record length; one- and two-byte varints are the common case and stay inline.
                b = data[pos]
                if b < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    b = (b & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    b, pos = _uvarint_tail(data, pos + 1, b)
                rec_end = pos + ((b >> 1) ^ -(b & 1))
                if rec_end > end or rec_end <= pos:
                    raise ValueError("record length outside the batch")
                # attributes, then skip the timestamp and offset deltas
                b = data[pos + 1]
                if b < 0x80:
                    pos += 2
                else:
                    b, pos = _uvarint_tail(data, pos + 2, b)
                b = data[pos]
                if b < 0x80:
                    pos += 1
                else:
                    b, pos = _uvarint_tail(data, pos + 1, b)
                # key (skipped)
                b = data[pos]
                if b == 1:
                    pos += 1
                else:
                    if b < 0x80:
                        pos += 1
                    else:
                        b, pos = _uvarint_tail(data, pos + 1, b)
                    n = (b >> 1) ^ -(b & 1)
                    if n < 0:
                        raise ValueError(f"key length {n}")
                    pos += n
                # value
                b = data[pos]
                if b < 0x80:
                    pos += 1
                elif data[pos + 1] < 0x80:
                    b = (b & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    b, pos = _uvarint_tail(data, pos + 1, b)
                n = (b >> 1) ^ -(b & 1)
                if n >= 0:
                    pos += n
                    append(data[pos - n : pos])
                elif n == -1:
                    append(None)
                else:
                    raise ValueError(f"value length {n}")
                if pos + 1 == rec_end and data[pos] == 0:
                    pos = rec_end
                else:
                    pos = _skip_headers(data, pos, rec_end)
        except IndexError:
            raise self._error("records run past the end of the batch") from None
        except ValueError as exc:
            raise self._error(f"malformed record: {exc}") from None
        if pos != end:
            raise self._error(f"{end - pos} bytes left after {h[12]} records")
        if type(data) is bytes:
            return out
        return [None if v is None else bytes(v) for v in out]

    def records(self) -> list[Record]:
        """Every record with offset, timestamp, key, value and headers."""
        h = self.header
        data = self.buffer
        if h[5] & COMPRESSION_MASK or type(data) is not bytes:
            data, pos, end = self._records_region()
            if type(data) is not bytes:
                data, pos, end = bytes(data[pos:end]), 0, end - pos
        else:
            pos = self.start + RECORD_BATCH_OVERHEAD
            end = self.start + LOG_OVERHEAD + h[1]
        out: list[Record] = []
        append = out.append
        new = _tuple_new
        base_offset = h[0]
        # LogAppendTime: every record has the batch's max timestamp (deltas are ignored)
        if h[5] & ATTR_LOG_APPEND_TIME:
            base_ts, ts_scale = h[8], 0
        else:
            base_ts, ts_scale = h[7], 1
        varint = decode_varint
        small = _SMALL_RECORD.unpack_from
        try:
            for _ in range(h[12]):
                # KRaft's small records (every varint one byte, null key, no headers): one unpack
                if pos + 6 <= end:
                    rl, _attrs, ts, od, kl, vl = small(data, pos)
                    if kl == 1 and (rl | ts | od | vl) < 0x80 and not (rl | vl) & 1:
                        vend = pos + 6 + (vl >> 1)
                        rec_end = pos + 1 + (rl >> 1)
                        if vend + 1 == rec_end <= end and data[vend] == 0:
                            append(new(Record, (base_offset + ((od >> 1) ^ -(od & 1)),
                                                base_ts + ((ts >> 1) ^ -(ts & 1)) * ts_scale,
                                                None, data[pos + 6 : vend], [])))
                            pos = rec_end
                            continue
                # Each varint: one byte inline (the common case), longer ones via decode_varint.
                b = data[pos]
                if b < 0x80:
                    length = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    length, pos = varint(data, pos)
                rec_end = pos + length
                if rec_end > end or length <= 0:
                    raise ValueError("record length outside the batch")
                b = data[pos + 1]  # past the attributes
                if b < 0x80:
                    ts_delta = (b >> 1) ^ -(b & 1)
                    pos += 2
                else:
                    ts_delta, pos = varint(data, pos + 1)
                b = data[pos]
                if b < 0x80:
                    offset_delta = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    offset_delta, pos = varint(data, pos)
                b = data[pos]
                if b == 1:
                    key: bytes | None = None
                    pos += 1
                else:
                    if b < 0x80:
                        n = (b >> 1) ^ -(b & 1)
                        pos += 1
                    else:
                        n, pos = varint(data, pos)
                    if n >= 0:
                        key = data[pos : pos + n]
                        pos += n
                    elif n == -1:
                        key = None
                    else:
                        raise ValueError(f"key length {n}")
                b = data[pos]
                if b < 0x80:
                    n = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    n, pos = varint(data, pos)
                if n >= 0:
                    value: bytes | None = data[pos : pos + n]
                    pos += n
                elif n == -1:
                    value = None
                else:
                    raise ValueError(f"value length {n}")
                if pos + 1 == rec_end and data[pos] == 0:
                    hdrs: list[tuple[str, bytes | None]] = []
                    pos = rec_end
                else:
                    hdrs, pos = _read_headers(data, pos, rec_end)
                    if pos != rec_end:
                        raise ValueError(f"record length {length} but {length + pos - rec_end} read")
                append(new(Record, (base_offset + offset_delta, base_ts + ts_delta * ts_scale,
                                    key, value, hdrs)))
        except IndexError:
            raise self._error("records run past the end of the batch") from None
        except (ValueError, UnicodeDecodeError, DecodeError) as exc:
            raise self._error(f"malformed record: {exc}") from None
        if pos != end:
            raise self._error(f"{end - pos} bytes left after {h[12]} records")
        return out

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records())


def _read_headers(data: bytes, pos: int, rec_end: int) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise ValueError(f"header count {count}")
    hdrs: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        n, pos = decode_varint(data, pos)
        if n < 0 or pos + n > rec_end:
            raise ValueError(f"header key length {n}")
        hkey = data[pos : pos + n].decode("utf-8")
        pos += n
        n, pos = decode_varint(data, pos)
        if n >= 0:
            hval: bytes | None = data[pos : pos + n]
            pos += n
        elif n == -1:
            hval = None
        else:
            raise ValueError(f"header value length {n}")
        hdrs.append((hkey, hval))
    return hdrs, pos


def _skip_headers(data: bytes, pos: int, rec_end: int) -> int:
    count, pos = decode_varint(data, pos)
    if count < 0:
        raise ValueError(f"header count {count}")
    for _ in range(count):
        n, pos = decode_varint(data, pos)
        if n < 0:
            raise ValueError(f"header key length {n}")
        pos += n
        n, pos = decode_varint(data, pos)
        if n >= 0:
            pos += n
        elif n != -1:
            raise ValueError(f"header value length {n}")
    if pos != rec_end:
        raise ValueError("record length does not match its fields")
    return pos


def iter_record_batches(
    buffer: bytes,
    *,
    start: int = 0,
    end: int | None = None,
    position: int | None = None,
    verify_crc: bool = True,
) -> Iterator[RecordBatch]:
    """Walk the batches of `buffer[start:end]`, checking length, magic and (by default) CRC.

    `position` is the file position of `buffer[start]` (default `start`), so errors and
    `RecordBatch.position` name the place in the file. Ending inside a batch raises
    `TruncatedBatchError`; a batch that is all there but wrong raises `CorruptBatchError`.
    """
    if end is None:
        end = len(buffer)
    shift = (start if position is None else position) - start
    pos = start
    unpack = BATCH_HEADER.unpack_from
    view = memoryview(buffer)
    crc_of = crc32c.crc32c
    new = RecordBatch.__new__
    min_length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
    while pos < end:
        if end - pos < RECORD_BATCH_OVERHEAD:
            _check_short_tail(buffer, pos, end, shift)
        h = unpack(buffer, pos)
        length = h[1]
        batch_end = pos + LOG_OVERHEAD + length
        if length < min_length or h[3] != MAGIC or batch_end > end or h[12] < 0 or h[6] < 0:
            _check_header(h, pos, end, shift)
        if verify_crc and crc_of(view[pos + CRC_START : batch_end]) != h[4]:
            actual = crc_of(view[pos + CRC_START : batch_end])
            raise CorruptBatchError(
                f"CRC mismatch in batch at base offset {h[0]}: stored {h[4]}, computed {actual}",
                offset=pos + shift,
            )
        batch = new(RecordBatch)
        batch.buffer = buffer
        batch.start = pos
        batch.position = pos + shift
        batch.header = h
        yield batch
        pos = batch_end


def _check_short_tail(buffer: bytes, pos: int, end: int, shift: int) -> None:
    # Fewer bytes than a batch header: say whether what is there is already wrong.
    if end - pos >= LOG_OVERHEAD:
        length = _PREFIX.unpack_from(buffer, pos)[1]
        if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptBatchError(
                f"batch length {length} below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}",
                offset=pos + shift,
            )
        if end - pos > 16 and buffer[pos + 16] != MAGIC:
            raise CorruptBatchError(
                f"magic {buffer[pos + 16]} where 2 was expected", offset=pos + shift
            )
    raise TruncatedBatchError(
        f"{end - pos} bytes at the end, fewer than a batch header", offset=pos + shift
    )


def _check_header(h: tuple[int, ...], pos: int, end: int, shift: int) -> None:
    base_offset, length, _epoch, magic = h[0], h[1], h[2], h[3]
    if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
        raise CorruptBatchError(
            f"batch length {length} below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}",
            offset=pos + shift,
        )
    if magic != MAGIC:
        raise CorruptBatchError(
            f"magic {magic} where 2 was expected (base offset {base_offset})", offset=pos + shift
        )
    if pos + LOG_OVERHEAD + length > end:
        raise TruncatedBatchError(
            f"batch of {length + LOG_OVERHEAD} bytes but only {end - pos} remain",
            offset=pos + shift,
        )
    raise CorruptBatchError(
        f"negative record count {h[12]} or offset delta {h[6]} at base offset {base_offset}",
        offset=pos + shift,
    )
