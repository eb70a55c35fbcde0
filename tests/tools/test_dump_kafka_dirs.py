"""dump-log on a Kafka `log.dirs` directory: ordinary topics, `__consumer_offsets` and
`__transaction_state` are printed as Kafka 4.1's `kafka-dump-log.sh` prints them with the
decoder each needs, and healthy data exits 0.

The inputs are built here with kraftpy's record-batch writer and kafka-python's builder (for a
compressed batch). The expected text was checked against Kafka 4.1's DumpLogSegments run on
these very files (`--print-data-log`, `--deep-iteration`, no option, `--offsets-decoder`,
`--transaction-log-decoder`), line for line, but for the words after "due to:" in error
lines, where Kafka prints Java's exception message (often just "null") and we name the field
and offset. Kafka's tool stops with an exception at a coordinator record without a key; ours
prints an error line for it and goes on. The same comparison on the directory of a real
Kafka 4.1 node (a topic, a gzip topic, a transactional producer, classic and KIP-848 consumer
groups, a deleted group) gave identical output.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from pathlib import Path

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kraftpy.protocol import txn_log
from kraftpy.protocol.control_records import control_key, end_txn_marker
from kraftpy.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kraftpy.protocol.messages.consumer_protocol_assignment import TopicPartition as Assigned
from kraftpy.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
    TopicPartition,
)
from kraftpy.protocol.record_batch import build_record_batch
from kraftpy.protocol.records.group_metadata_key import GroupMetadataKey
from kraftpy.protocol.records.group_metadata_value import GroupMetadataValue, MemberMetadata
from kraftpy.protocol.records.legacy_offset_commit_key import LegacyOffsetCommitKey
from kraftpy.protocol.records.legacy_offset_commit_value import LegacyOffsetCommitValue
from kraftpy.protocol.records.offset_commit_key import OffsetCommitKey
from kraftpy.protocol.records.offset_commit_value import OffsetCommitValue
from kraftpy.protocol.records.transaction_log_value import PartitionsSchema, TransactionLogValue
from kraftpy.tools import dump_log, pid_audit
from kraftpy.tools.logdecode.java_text import java_utf8
from kraftpy.tools.logdecode.paths import LogKind, classify
from kraftpy.tools.logdecode.records import FULL_NAMES

_short = struct.Struct(">h").pack
SEGMENT = "00000000000000000000.log"


# --- inputs -------------------------------------------------------------------------------

WEIRD_VALUES = [b"\xc0\x80", b"\xed\xa0\x80x", b"\xf4\x90\x80\x80", b"\xf8\x88\x80\x80\x80",
                b"\x80\xbf", b"\xe2\x82A", b"\xf0\x9f\x98\x80", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf",
                b"cr\rx\x1b[0m", b"\xef\xbb\xbfbom", b"\xed\xbf\xbf", b"\xf0\x90\x80", b"a\x00b"]


def topic_segment() -> bytes:
    """An ordinary topic: an idempotent batch (keys, a null key, a null value, empty key and
    value, headers, text and bytes that are not UTF-8), an lz4 batch from kafka-python, a
    transactional batch and its COMMIT marker."""
    first = build_record_batch(
        [b"hello", b"no key", None, b"", b"with headers", "日本語 ✓".encode(), b"line1\nline2",
         *WEIRD_VALUES],
        keys=[b"k1", None, b"gone", b"", b"h", "ünï".encode(), b"tab\tnl\nend",
              *[bytes([65 + i]) for i in range(len(WEIRD_VALUES))]],
        headers=[[], [], [], [], [("a", b"1"), ("bee", None)], *[[] for _ in range(15)],
                 [("", b"x")]],
        timestamp=1700000000000, producer_id=0, producer_epoch=0, base_sequence=0)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=3, is_transactional=0,
                                        producer_id=1, producer_epoch=0, base_sequence=0,
                                        batch_size=1 << 20)
    for i in range(3):
        builder.append(i, 1700000000100 + i, b"z%d" % i, b"compressed " * 4 + b"%d" % i, [])
    lz4 = bytearray(builder.build())
    lz4[0:8] = struct.pack(">q", 21)  # its base offset (not covered by the CRC)
    txn = build_record_batch([b"committed"], keys=[b"t1"], base_offset=24,
                             timestamp=1700000000200, transactional=True, producer_id=2,
                             producer_epoch=0, base_sequence=0)
    marker = build_record_batch([end_txn_marker(0)], keys=[control_key(1)], base_offset=25,
                                timestamp=1700000000300,
                                control=True, transactional=True, producer_id=2, producer_epoch=0)
    return first + bytes(lz4) + txn + marker


def offsets_segment(*, healthy: bool = False) -> bytes:
    """`__consumer_offsets`: commits at several value versions, a legacy commit, classic group
    metadata (consumer protocol: embedded subscription and assignment, one garbled, one of a
    future version; another protocol type: bytes kept), retired types 9 and 18, damaged keys
    and values, trailing bytes (ignored, as Kafka does) and a tombstone."""
    key = _short(1) + OffsetCommitKey(group="g", topic="t", partition=3).encode(0)
    sub = _short(3) + ConsumerProtocolSubscription(
        topics=["t"], user_data=b"\x01\x02", owned_partitions=[TopicPartition(topic="t", partitions=[0, 1])],
        generation_id=7, rack_id="r1").encode(3)
    assignment = _short(1) + ConsumerProtocolAssignment(
        assigned_partitions=[Assigned(topic="t", partitions=[1])], user_data=None).encode(1)
    future = _short(7) + ConsumerProtocolSubscription(
        topics=["t"], user_data=None, owned_partitions=[], generation_id=2, rack_id=None).encode(3)
    member = {"group_instance_id": None, "client_id": "c", "client_host": "/h",
              "rebalance_timeout": 10, "session_timeout": 20}
    members = [
        MemberMetadata(member_id="m1", **{**member, "group_instance_id": "i1"}, subscription=sub,
                       assignment=assignment),
        MemberMetadata(member_id="m2", **member, subscription=b"\x00\x00\xff\xff\xff\xff",
                       assignment=b"\x00"),
        MemberMetadata(member_id="m3", **member, subscription=future + b"\x00\x00", assignment=b""),
    ]
    group = _short(2) + GroupMetadataKey(group="g").encode(0)

    def value(message, version: int) -> bytes:
        return _short(version) + message.encode(version)

    records = [
        (key, value(OffsetCommitValue(offset=10, leader_epoch=2, metadata='meta"data\\ü',
                                      commit_timestamp=99), 3)),
        (key, value(OffsetCommitValue(offset=11, commit_timestamp=99, expire_timestamp=123), 1)),
        (_short(0) + LegacyOffsetCommitKey(group="g", topic="t", partition=0).encode(0),
         value(LegacyOffsetCommitValue(offset=1, metadata="m", commit_timestamp=2), 0)),
        (group, value(GroupMetadataValue(protocol_type="consumer", generation=4, protocol="range",
                                         leader="m1", current_state_timestamp=5, members=members), 3)),
        (group, value(GroupMetadataValue(protocol_type="connect", generation=1, protocol="x",
                                         leader="m1", current_state_timestamp=5,
                                         members=members[:1]), 2)),
        (_short(9) + b"\x00\x01g", b"\x00\x00"),
        (_short(18) + b"\x00\x01g", None),
        (key, _short(9) + b"\x00"),
        (key[:6], None),
        (key, _short(4) + b"\x00\x00"),
        (b"\x00", b"\x00\x00"),
        (key + b"extra", value(OffsetCommitValue(offset=12, commit_timestamp=1), 4) + b"zz"),
        (key, None),
    ]
    if healthy:  # what a running coordinator writes (retired types included)
        records = records[:7] + records[-1:]
    return build_record_batch([v for _, v in records], keys=[k for k, _ in records],
                              timestamp=1700000000001)


def transaction_segment(*, healthy: bool = False) -> bytes:
    """`__transaction_state`: a v1 value with every tagged field set, a v0 value, an unknown
    record type, a tombstone and a value that does not decode."""
    full = TransactionLogValue(
        producer_id=5, previous_producer_id=4, next_producer_id=6, producer_epoch=1,
        next_producer_epoch=0, transaction_timeout_ms=60000, transaction_status=2,
        transaction_partitions=[PartitionsSchema(topic="a", partition_ids=[0, 2]),
                                PartitionsSchema(topic="b", partition_ids=[1])],
        transaction_last_update_timestamp_ms=7, transaction_start_timestamp_ms=6,
        client_transaction_version=2)
    empty = TransactionLogValue(producer_id=5, producer_epoch=1, transaction_timeout_ms=60000,
                                transaction_status=0, transaction_partitions=None,
                                transaction_last_update_timestamp_ms=7,
                                transaction_start_timestamp_ms=-1)
    records = [
        (txn_log.encode_key("tx-ü"), txn_log.encode_value(full, 1)),
        (txn_log.encode_key("tx0"), txn_log.encode_value(empty, 0)),
        (_short(1) + b"\x00\x02ab", b"\x00\x01"),
        (txn_log.encode_key("gone"), None),
        (txn_log.encode_key("bad"), b"\x00\x01\x00\x00"),
    ]
    if healthy:
        records = records[:2] + records[3:4]
    return build_record_batch([v for _, v in records], keys=[k for k, _ in records],
                              timestamp=1700000000002)


def write_partition(root: Path, name: str, data: bytes) -> Path:
    part = root / name
    part.mkdir(parents=True, exist_ok=True)
    (part / SEGMENT).write_bytes(data)
    return part / SEGMENT


def run_dump(paths: list[Path], **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = dump_log.main([str(p) for p in paths], out=out, err=err, progress=False, **kw)
    return status, out.getvalue(), err.getvalue()


# --- what Kafka 4.1's DumpLogSegments prints for them (after "Dumping" and "Log starting offset")

TOPIC_DEFAULT = [
    'baseOffset: 0 lastOffset: 20 count: 21 baseSequence: 0 lastSequence: 20 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 357 magic: 2 compresscodec: none crc: 2898823471 isvalid: true',
    'baseOffset: 21 lastOffset: 23 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 357 CreateTime: 1700000000102 size: 140 magic: 2 compresscodec: lz4 crc: 1621740448 isvalid: true',
    'baseOffset: 24 lastOffset: 24 count: 1 baseSequence: 0 lastSequence: 0 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 497 CreateTime: 1700000000200 size: 79 magic: 2 compresscodec: none crc: 2378112354 isvalid: true',
    'baseOffset: 25 lastOffset: 25 count: 1 baseSequence: -1 lastSequence: -1 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 576 CreateTime: 1700000000300 size: 78 magic: 2 compresscodec: none crc: 3592302527 isvalid: true',
]

TOPIC_DEEP = [
    'baseOffset: 0 lastOffset: 20 count: 21 baseSequence: 0 lastSequence: 20 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 357 magic: 2 compresscodec: none crc: 2898823471 isvalid: true',
    '| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: 0 headerKeys: []',
    '| offset: 1 CreateTime: 1700000000000 keySize: -1 valueSize: 6 sequence: 1 headerKeys: []',
    '| offset: 2 CreateTime: 1700000000000 keySize: 4 valueSize: -1 sequence: 2 headerKeys: []',
    '| offset: 3 CreateTime: 1700000000000 keySize: 0 valueSize: 0 sequence: 3 headerKeys: []',
    '| offset: 4 CreateTime: 1700000000000 keySize: 1 valueSize: 12 sequence: 4 headerKeys: [a,bee]',
    '| offset: 5 CreateTime: 1700000000000 keySize: 5 valueSize: 13 sequence: 5 headerKeys: []',
    '| offset: 6 CreateTime: 1700000000000 keySize: 10 valueSize: 11 sequence: 6 headerKeys: []',
    '| offset: 7 CreateTime: 1700000000000 keySize: 1 valueSize: 2 sequence: 7 headerKeys: []',
    '| offset: 8 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 8 headerKeys: []',
    '| offset: 9 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 9 headerKeys: []',
    '| offset: 10 CreateTime: 1700000000000 keySize: 1 valueSize: 5 sequence: 10 headerKeys: []',
    '| offset: 11 CreateTime: 1700000000000 keySize: 1 valueSize: 2 sequence: 11 headerKeys: []',
    '| offset: 12 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 12 headerKeys: []',
    '| offset: 13 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 13 headerKeys: []',
    '| offset: 14 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 14 headerKeys: []',
    '| offset: 15 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 15 headerKeys: []',
    '| offset: 16 CreateTime: 1700000000000 keySize: 1 valueSize: 8 sequence: 16 headerKeys: []',
    '| offset: 17 CreateTime: 1700000000000 keySize: 1 valueSize: 6 sequence: 17 headerKeys: []',
    '| offset: 18 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 18 headerKeys: []',
    '| offset: 19 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 19 headerKeys: []',
    '| offset: 20 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 20 headerKeys: []',
    'baseOffset: 21 lastOffset: 23 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 357 CreateTime: 1700000000102 size: 140 magic: 2 compresscodec: lz4 crc: 1621740448 isvalid: true',
    '| offset: 21 CreateTime: 1700000000100 keySize: 2 valueSize: 45 sequence: 0 headerKeys: []',
    '| offset: 22 CreateTime: 1700000000101 keySize: 2 valueSize: 45 sequence: 1 headerKeys: []',
    '| offset: 23 CreateTime: 1700000000102 keySize: 2 valueSize: 45 sequence: 2 headerKeys: []',
    'baseOffset: 24 lastOffset: 24 count: 1 baseSequence: 0 lastSequence: 0 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 497 CreateTime: 1700000000200 size: 79 magic: 2 compresscodec: none crc: 2378112354 isvalid: true',
    '| offset: 24 CreateTime: 1700000000200 keySize: 2 valueSize: 9 sequence: 0 headerKeys: []',
    'baseOffset: 25 lastOffset: 25 count: 1 baseSequence: -1 lastSequence: -1 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 576 CreateTime: 1700000000300 size: 78 magic: 2 compresscodec: none crc: 3592302527 isvalid: true',
    '| offset: 25 CreateTime: 1700000000300 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0',
]

TOPIC_PRINT_DATA = [
    'baseOffset: 0 lastOffset: 20 count: 21 baseSequence: 0 lastSequence: 20 producerId: 0 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000000 size: 357 magic: 2 compresscodec: none crc: 2898823471 isvalid: true',
    '| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: 0 headerKeys: [] key: k1 payload: hello',
    '| offset: 1 CreateTime: 1700000000000 keySize: -1 valueSize: 6 sequence: 1 headerKeys: [] payload: no key',
    '| offset: 2 CreateTime: 1700000000000 keySize: 4 valueSize: -1 sequence: 2 headerKeys: [] key: gone',
    '| offset: 3 CreateTime: 1700000000000 keySize: 0 valueSize: 0 sequence: 3 headerKeys: [] key:  payload: ',
    '| offset: 4 CreateTime: 1700000000000 keySize: 1 valueSize: 12 sequence: 4 headerKeys: [a,bee] key: h payload: with headers',
    '| offset: 5 CreateTime: 1700000000000 keySize: 5 valueSize: 13 sequence: 5 headerKeys: [] key: ünï payload: 日本語 ✓',
    '| offset: 6 CreateTime: 1700000000000 keySize: 10 valueSize: 11 sequence: 6 headerKeys: [] key: tab\tnl',
    'end payload: line1',
    'line2',
    '| offset: 7 CreateTime: 1700000000000 keySize: 1 valueSize: 2 sequence: 7 headerKeys: [] key: A payload: ��',
    '| offset: 8 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 8 headerKeys: [] key: B payload: �x',
    '| offset: 9 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 9 headerKeys: [] key: C payload: ����',
    '| offset: 10 CreateTime: 1700000000000 keySize: 1 valueSize: 5 sequence: 10 headerKeys: [] key: D payload: �����',
    '| offset: 11 CreateTime: 1700000000000 keySize: 1 valueSize: 2 sequence: 11 headerKeys: [] key: E payload: ��',
    '| offset: 12 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 12 headerKeys: [] key: F payload: �A',
    '| offset: 13 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 13 headerKeys: [] key: G payload: 😀',
    '| offset: 14 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 14 headerKeys: [] key: H payload: ���',
    '| offset: 15 CreateTime: 1700000000000 keySize: 1 valueSize: 4 sequence: 15 headerKeys: [] key: I payload: ����',
    '| offset: 16 CreateTime: 1700000000000 keySize: 1 valueSize: 8 sequence: 16 headerKeys: [] key: J payload: cr\rx\x1b[0m',
    '| offset: 17 CreateTime: 1700000000000 keySize: 1 valueSize: 6 sequence: 17 headerKeys: [] key: K payload: \ufeffbom',
    '| offset: 18 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 18 headerKeys: [] key: L payload: �',
    '| offset: 19 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 19 headerKeys: [] key: M payload: �',
    '| offset: 20 CreateTime: 1700000000000 keySize: 1 valueSize: 3 sequence: 20 headerKeys: [] key: N payload: a\x00b',
    'baseOffset: 21 lastOffset: 23 count: 3 baseSequence: 0 lastSequence: 2 producerId: 1 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 357 CreateTime: 1700000000102 size: 140 magic: 2 compresscodec: lz4 crc: 1621740448 isvalid: true',
    '| offset: 21 CreateTime: 1700000000100 keySize: 2 valueSize: 45 sequence: 0 headerKeys: [] key: z0 payload: compressed compressed compressed compressed 0',
    '| offset: 22 CreateTime: 1700000000101 keySize: 2 valueSize: 45 sequence: 1 headerKeys: [] key: z1 payload: compressed compressed compressed compressed 1',
    '| offset: 23 CreateTime: 1700000000102 keySize: 2 valueSize: 45 sequence: 2 headerKeys: [] key: z2 payload: compressed compressed compressed compressed 2',
    'baseOffset: 24 lastOffset: 24 count: 1 baseSequence: 0 lastSequence: 0 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: false deleteHorizonMs: OptionalLong.empty position: 497 CreateTime: 1700000000200 size: 79 magic: 2 compresscodec: none crc: 2378112354 isvalid: true',
    '| offset: 24 CreateTime: 1700000000200 keySize: 2 valueSize: 9 sequence: 0 headerKeys: [] key: t1 payload: committed',
    'baseOffset: 25 lastOffset: 25 count: 1 baseSequence: -1 lastSequence: -1 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty position: 576 CreateTime: 1700000000300 size: 78 magic: 2 compresscodec: none crc: 3592302527 isvalid: true',
    '| offset: 25 CreateTime: 1700000000300 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 0',
]

OFFSETS = [
    'baseOffset: 0 lastOffset: 12 count: 13 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000001 size: 741 magic: 2 compresscodec: none crc: 1999889667 isvalid: true',
    '| offset: 0 CreateTime: 1700000000001 keySize: 12 valueSize: 36 sequence: -1 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: {"version":"3","data":{"offset":10,"leaderEpoch":2,"metadata":"meta\\"data\\\\ü","commitTimestamp":99}}',
    '| offset: 1 CreateTime: 1700000000001 keySize: 12 valueSize: 28 sequence: -1 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: {"version":"1","data":{"offset":11,"metadata":"","commitTimestamp":99,"expireTimestamp":123}}',
    '| offset: 2 CreateTime: 1700000000001 keySize: 12 valueSize: 21 sequence: -1 headerKeys: [] key: {"type":"0","data":{"group":"g","topic":"t","partition":0}} payload: {"version":"0","data":{"offset":1,"metadata":"m","commitTimestamp":2}}',
    '| offset: 3 CreateTime: 1700000000001 keySize: 5 valueSize: 223 sequence: -1 headerKeys: [] key: {"type":"2","data":{"group":"g"}} payload: {"version":"3","data":{"protocolType":"consumer","generation":4,"protocol":"range","leader":"m1","currentStateTimestamp":5,"members":[{"memberId":"m1","groupInstanceId":"i1","clientId":"c","clientHost":"/h","rebalanceTimeout":10,"sessionTimeout":20,"subscription":{"topics":["t"],"userData":"AQI=","ownedPartitions":[{"topic":"t","partitions":[0,1]}],"generationId":7,"rackId":"r1"},"assignment":{"assignedPartitions":[{"topic":"t","partitions":[1]}],"userData":null}},{"memberId":"m2","groupInstanceId":null,"clientId":"c","clientHost":"/h","rebalanceTimeout":10,"sessionTimeout":20,"subscription":"AAD/////","assignment":"AA=="},{"memberId":"m3","groupInstanceId":null,"clientId":"c","clientHost":"/h","rebalanceTimeout":10,"sessionTimeout":20,"subscription":{"topics":["t"],"userData":null,"ownedPartitions":[],"generationId":2,"rackId":null},"assignment":""}]}}',
    '| offset: 4 CreateTime: 1700000000001 keySize: 5 valueSize: 124 sequence: -1 headerKeys: [] key: {"type":"2","data":{"group":"g"}} payload: {"version":"2","data":{"protocolType":"connect","generation":1,"protocol":"x","leader":"m1","currentStateTimestamp":5,"members":[{"memberId":"m1","clientId":"c","clientHost":"/h","rebalanceTimeout":10,"sessionTimeout":20,"subscription":"AAMAAAABAAF0AAAAAgECAAAAAQABdAAAAAIAAAAAAAAAAQAAAAcAAnIx","assignment":"AAEAAAABAAF0AAAAAQAAAAH/////"}]}}',
    '| offset: 5 CreateTime: 1700000000001 keySize: 5 valueSize: 2 sequence: -1 headerKeys: [] key: Unknown record type 9 at offset 5, skipping.',
    '| offset: 6 CreateTime: 1700000000001 keySize: 5 valueSize: -1 sequence: -1 headerKeys: [] key: Unknown record type 18 at offset 6, skipping.',
    '| offset: 7 CreateTime: 1700000000001 keySize: 12 valueSize: 3 sequence: -1 headerKeys: [] key: Error at offset 7, skipping. Found an unknown record version 9 for 1 type',
    "| offset: 8 CreateTime: 1700000000001 keySize: 6 valueSize: -1 sequence: -1 headerKeys: [] key: Error at offset 8, skipping. Could not read record with version 1 from key's buffer due to: truncated input (field topic, offset 5).",
    "| offset: 9 CreateTime: 1700000000001 keySize: 12 valueSize: 4 sequence: -1 headerKeys: [] key: Error at offset 9, skipping. Could not read record with version 4 from value's buffer due to: truncated input (field offset, offset 2).",
    "| offset: 10 CreateTime: 1700000000001 keySize: 1 valueSize: 2 sequence: -1 headerKeys: [] key: Error at offset 10, skipping. Could not read version from key's buffer.",
    '| offset: 11 CreateTime: 1700000000001 keySize: 17 valueSize: 26 sequence: -1 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: {"version":"4","data":{"offset":12,"leaderEpoch":-1,"metadata":"","commitTimestamp":1}}',
    '| offset: 12 CreateTime: 1700000000001 keySize: 12 valueSize: -1 sequence: -1 headerKeys: [] key: {"type":"1","data":{"group":"g","topic":"t","partition":3}} payload: <DELETE>',
]

TRANSACTIONS = [
    'baseOffset: 0 lastOffset: 4 count: 5 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000002 size: 261 magic: 2 compresscodec: none crc: 2863157186 isvalid: true',
    '| offset: 0 CreateTime: 1700000000002 keySize: 9 valueSize: 83 sequence: -1 headerKeys: [] key: {"type":"0","data":{"transactionalId":"tx-ü"}} payload: {"version":"1","data":{"producerId":5,"previousProducerId":4,"nextProducerId":6,"producerEpoch":1,"nextProducerEpoch":0,"transactionTimeoutMs":60000,"transactionStatus":2,"transactionPartitions":[{"topic":"a","partitionIds":[0,2]},{"topic":"b","partitionIds":[1]}],"transactionLastUpdateTimestampMs":7,"transactionStartTimestampMs":6,"clientTransactionVersion":2}}',
    '| offset: 1 CreateTime: 1700000000002 keySize: 7 valueSize: 37 sequence: -1 headerKeys: [] key: {"type":"0","data":{"transactionalId":"tx0"}} payload: {"version":"0","data":{"producerId":5,"producerEpoch":1,"transactionTimeoutMs":60000,"transactionStatus":0,"transactionPartitions":null,"transactionLastUpdateTimestampMs":7,"transactionStartTimestampMs":-1}}',
    '| offset: 2 CreateTime: 1700000000002 keySize: 6 valueSize: 2 sequence: -1 headerKeys: [] key: Unknown record type 1 at offset 2, skipping.',
    '| offset: 3 CreateTime: 1700000000002 keySize: 8 valueSize: -1 sequence: -1 headerKeys: [] key: {"type":"0","data":{"transactionalId":"gone"}} payload: <DELETE>',
    "| offset: 4 CreateTime: 1700000000002 keySize: 7 valueSize: 4 sequence: -1 headerKeys: [] key: Error at offset 4, skipping. Could not read record with version 1 from value's buffer due to: truncated input (field ProducerId, offset 2).",
]


def _body(out: str, path: Path) -> list[str]:
    lines = out.split("\n")
    assert lines[:2] == [f"Dumping {path}", "Log starting offset: 0"]
    assert lines[-1] == ""
    return lines[2:-1]


def _without_cause(line: str) -> str:
    """An error line up to "due to:" (Kafka prints Java's exception message after it)."""
    return line.split(" due to: ", 1)[0]


# --- ordinary topics -----------------------------------------------------------------------

def test_a_topic_prints_batch_lines_by_default(tmp_path: Path) -> None:
    segment = write_partition(tmp_path, "plain-0", topic_segment())
    status, out, err = run_dump([segment])
    assert (status, err) == (0, "")
    assert _body(out, segment) == TOPIC_DEFAULT


def test_a_topic_with_deep_iteration_prints_record_lines(tmp_path: Path) -> None:
    segment = write_partition(tmp_path, "plain-0", topic_segment())
    status, out, err = run_dump([segment], deep_iteration=True)
    assert (status, err) == (0, "")
    assert _body(out, segment) == TOPIC_DEEP


def test_a_topic_with_print_data_log_prints_keys_and_values(tmp_path: Path) -> None:
    segment = write_partition(tmp_path, "plain-0", topic_segment())
    status, out, err = run_dump([segment], print_data=True)
    assert (status, err) == (0, "")
    assert _body(out, segment) == TOPIC_PRINT_DATA


@pytest.mark.parametrize(("data", "text"), [
    (b"\xed\xa0\x80x", "\ufffdx"),  # an encoded surrogate: one U+FFFD (Python's own: three)
    (b"\xed\xa0", "\ufffd"),  # a surrogate's first two bytes at the end
    (b"\xed\xa0A", "\ufffdA"),
    (b"\xc0\x80", "\ufffd\ufffd"),
    (b"\xe0\x80\xaf", "\ufffd\ufffd\ufffd"),
    (b"\xf0\x80\x80\xaf", "\ufffd\ufffd\ufffd\ufffd"),
    (b"\xf4\x90\x80\x80", "\ufffd\ufffd\ufffd\ufffd"),
    (b"\xf8\x88\x80\x80\x80", "\ufffd" * 5),
    (b"\xe2\x82A", "\ufffdA"),
    (b"\xf0\x90\x80", "\ufffd"),
    (b"\xf0\x9f\x98\x80", "\U0001f600"),
    (b"\xef\xbb\xbfbom", "\ufeffbom"),
])
def test_bytes_read_as_java_reads_them(data: bytes, text: str) -> None:
    """Java's `new String(bytes, UTF_8)` (Kafka's StringDecoder), as DumpLogSegments printed
    them; 3,000 random byte strings of such pieces also printed the same in both tools."""
    assert java_utf8(data) == text


# --- the coordinators' logs ----------------------------------------------------------------

def test_consumer_offsets_as_the_offsets_decoder_prints_them(tmp_path: Path) -> None:
    segment = write_partition(tmp_path, "__consumer_offsets-7", offsets_segment())
    status, out, err = run_dump([segment])
    assert [_without_cause(line) for line in _body(out, segment)] == \
        [_without_cause(line) for line in OFFSETS]
    # damaged records (an unknown value version, short key and value, a key without its
    # type) make exit status 1 and are named; the retired types 9 and 18 are not damage
    assert status == 1
    assert [line.split(": ")[1] for line in err.splitlines()] == \
        [f"undecodable-record at position 0, offset {n}" for n in (7, 8, 9, 10)]


def test_transaction_state_as_the_transaction_log_decoder_prints_it(tmp_path: Path) -> None:
    segment = write_partition(tmp_path, "__transaction_state-49", transaction_segment())
    status, out, err = run_dump([segment])
    assert [_without_cause(line) for line in _body(out, segment)] == \
        [_without_cause(line) for line in TRANSACTIONS]
    assert status == 1 and "offset 4: Could not read record with version 1 from value's" in err


def test_a_coordinator_record_without_a_key_is_reported(tmp_path: Path) -> None:
    """Kafka's tool stops there with an exception; ours names it and goes on."""
    segment = write_partition(tmp_path, "__consumer_offsets-1",
                              build_record_batch([b"\x00\x01", b"\x00\x02"], keys=[None, b"\x00"]))
    status, out, err = run_dump([segment])
    lines = _body(out, segment)
    assert lines[1].endswith("key: Error at offset 0, skipping. the record has no key")
    assert lines[2].endswith("key: Error at offset 1, skipping. Could not read version from "
                             "key's buffer.")
    assert status == 1 and len(err.splitlines()) == 2


def test_coordinator_rows_carry_type_key_and_value(tmp_path: Path) -> None:
    write_partition(tmp_path, "__consumer_offsets-0", offsets_segment(healthy=True))
    write_partition(tmp_path, "__transaction_state-0", transaction_segment(healthy=True))
    status, out, err = run_dump([tmp_path], mode="json")
    assert (status, err) == (0, "")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [(r["record_type"], r["version"]) for r in rows] == [
        ("OFFSET_COMMIT", 3), ("OFFSET_COMMIT", 1), ("LEGACY_OFFSET_COMMIT", 0),
        ("GROUP_METADATA", 3), ("GROUP_METADATA", 2), ("UNKNOWN_9", None), ("UNKNOWN_18", None),
        ("OFFSET_COMMIT", None),
        ("TRANSACTION_LOG", 1), ("TRANSACTION_LOG", 0), ("TRANSACTION_LOG", None)]
    assert rows[0]["payload"] == {"key": {"group": "g", "topic": "t", "partition": 3},
                                  "value": {"offset": 10, "leaderEpoch": 2,
                                            "metadata": 'meta"data\\ü', "commitTimestamp": 99}}
    member = rows[3]["payload"]["value"]["members"][0]
    assert member["subscription"]["ownedPartitions"] == [{"topic": "t", "partitions": [0, 1]}]
    assert rows[5]["payload"] is None and rows[5]["error"] is None
    assert rows[7]["payload"]["value"] is None  # a tombstone
    assert rows[8]["payload"]["value"]["nextProducerEpoch"] == 0
    assert all(r["error"] is None and not r["is_control"] for r in rows)


# --- a whole log.dirs directory ------------------------------------------------------------

@pytest.fixture
def log_dirs(tmp_path: Path) -> Path:
    """A broker's data directory: the metadata log, two topics (one a renamed copy being
    deleted), the coordinators' logs with what a running cluster writes."""
    from support.metadata_logs import synthetic_cluster

    synthetic_cluster(tmp_path / "__cluster_metadata-0", records=300, seed=4)
    write_partition(tmp_path, "plain-0", topic_segment())
    write_partition(tmp_path, "plain-1.6a1f0c2b8e4d4f0d9b1c2d3e4f5a6b7c-delete", topic_segment())
    write_partition(tmp_path, "__consumer_offsets-0", offsets_segment(healthy=True))
    write_partition(tmp_path, "__transaction_state-0", transaction_segment(healthy=True))
    return tmp_path


def test_a_healthy_log_dirs_directory_exits_0(log_dirs: Path) -> None:
    status, out, err = run_dump([log_dirs])
    assert (status, err) == (0, "")
    assert "UNKNOWN_" not in out.replace("Unknown record type 9", "").replace("type 18", "")
    assert out.count("Dumping ") == len(list(log_dirs.rglob("*.log"))) + len(
        list(log_dirs.rglob("*.checkpoint")))
    status, out, err = run_dump([log_dirs], print_data=True)
    assert status == 0 and out.count("key: k1 payload: hello") == 2


def test_json_rows_cover_every_partition_with_the_batch_fields(log_dirs: Path) -> None:
    status, out, err = run_dump([log_dirs], mode="json")
    assert (status, err) == (0, "")
    rows = [json.loads(line) for line in out.splitlines()]
    assert {r["file"].split("/")[-2] for r in rows} == {
        "__cluster_metadata-0", "__consumer_offsets-0", "__transaction_state-0", "plain-0",
        "plain-1.6a1f0c2b8e4d4f0d9b1c2d3e4f5a6b7c-delete"}
    assert all(r["error"] is None and list(r) == list(FULL_NAMES) for r in rows)
    plain = [r for r in rows if r["file"].endswith("plain-0/" + SEGMENT)]
    assert {(r["topic"], r["partition"]) for r in plain} == {("plain", 0)}
    assert [r["offset"] for r in plain] == list(range(26))
    first, lz4, txn, marker = plain[0], plain[21], plain[24], plain[25]
    assert (first["record_type"], first["key"], first["value"], first["headers"]) == (
        "DATA", base64.b64encode(b"k1").decode(), base64.b64encode(b"hello").decode(), [])
    assert plain[2]["value"] is None and plain[1]["key"] is None
    assert plain[4]["headers"] == [{"key": "a", "value": base64.b64encode(b"1").decode()},
                                   {"key": "bee", "value": None}]
    assert (first["producer_id"], first["producer_epoch"], first["base_sequence"],
            first["last_sequence"], first["sequence"], plain[7]["sequence"]) == (0, 0, 0, 20, 0, 7)
    assert (lz4["compression"], lz4["producer_id"], lz4["batch_base_offset"],
            lz4["batch_last_offset"], lz4["sequence"]) == ("lz4", 1, 21, 23, 0)
    assert (txn["is_transactional"], txn["producer_id"], txn["is_control"]) == (True, 2, False)
    assert (marker["is_control"], marker["record_type"], marker["coordinator_epoch"],
            marker["is_transactional"], marker["sequence"], marker["key"]) == (
        True, "COMMIT", 0, True, -1, None)
    metadata = [r for r in rows if "__cluster_metadata" in r["file"]]
    assert {(r["topic"], r["partition"], r["producer_id"], r["key"]) for r in metadata} == {
        ("__cluster_metadata", 0, -1, None)}


def test_json_rows_with_print_data_log_hold_text(log_dirs: Path) -> None:
    status, out, _ = run_dump([log_dirs / "plain-0"], mode="json", print_data=True)
    rows = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and (rows[0]["key"], rows[0]["value"]) == ("k1", "hello")
    assert rows[5]["value"] == "日本語 ✓" and rows[4]["headers"][0] == {"key": "a", "value": "1"}
    assert rows[7]["value"] == java_utf8(WEIRD_VALUES[0])


def test_summary_counts_topic_records_as_data(log_dirs: Path) -> None:
    status, out, _ = run_dump([log_dirs], mode="summary-json")
    summary = json.loads(out)
    assert status == 0 and summary["problems"] == 0
    assert summary["by_type"]["DATA"] == 2 * (21 + 3 + 1)  # two copies of three data batches
    assert summary["by_type"]["COMMIT"] == 2 and summary["by_type"]["OFFSET_COMMIT"] == 3


def test_pid_audit_of_a_log_dirs_directory(log_dirs: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert pid_audit.main([str(log_dirs)], fmt="json", out=out, err=err) == 0
    result = json.loads(out.getvalue())
    assert len(result["blocks"]) == 36  # those of the metadata log, and nothing else
    assert result["findings"] == [] and err.getvalue() == ""


@pytest.mark.parametrize(("path", "log"), [
    ("d/__cluster_metadata-0/00000000000000000000.log", LogKind.METADATA),
    ("d/__cluster_metadata-0/00000000000000000100-0000000001.checkpoint", LogKind.METADATA),
    ("d/bootstrap.checkpoint", LogKind.METADATA),
    ("copied/00000000000000000000.log", LogKind.METADATA),
    ("d/__transaction_state-49/00000000000000000000.log", LogKind.TRANSACTION),
    ("d/__transaction_state-0.0f1e2d3c4b5a69788796a5b4c3d2e1f0-stray/00000000000000000000.log",
     LogKind.TRANSACTION),
    ("d/__consumer_offsets-12/00000000000000000000.log", LogKind.OFFSETS),
    ("d/orders-3/00000000000000000000.log", LogKind.DATA),
    ("d/my-topic-10.0f1e2d3c4b5a69788796a5b4c3d2e1f0-future/00000000000000000000.log", LogKind.DATA),
    ("d/__share_group_state-0/00000000000000000000.log", LogKind.DATA),
])
def test_what_a_partition_holds(path: str, log: LogKind) -> None:
    assert classify(path).log is log
