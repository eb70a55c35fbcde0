"""Every class at every version: an object with each field of that version set round-trips,
arrays of fixed-layout elements included (decoded whole, falling back per element when an
element carries tagged fields), and a cut buffer is a DecodeError."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.message import FieldSpec, Message
from kraftpy.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraftpy.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from support.generated import generated_classes, versions

_SCALARS: dict[str, Any] = {
    "bool": True, "int8": -7, "int16": 300, "uint16": 65000, "int32": -70000,
    "uint32": 4_000_000_000, "int64": 1 << 40, "float64": 2.5, "string": "s",
    "bytes": b"\x00\x01", "records": b"\x02", "uuid": uuid.UUID(int=99),
}


def _value(f: FieldSpec, version: int) -> Any:
    if f.kind == "struct":
        return _at(f.struct, version)
    if f.kind == "array":
        if f.elem == "struct":
            return [_at(f.struct, version), _at(f.struct, version)]
        return [_SCALARS[f.elem]] * 3
    return _SCALARS[f.kind]


def _at(cls: type[Message], version: int) -> Message:
    return cls(**{f.attr: _value(f, version) for f in cls._FIELDS if f.present(version)})


def test_every_version_round_trips() -> None:
    done = 0
    for cls in generated_classes(top_only=True):
        for version in versions(cls):
            obj = _at(cls, version)
            data = obj.encode(version)
            assert cls.decode(data, version) == obj, (cls.__name__, version)
            if data:
                with pytest.raises(DecodeError):
                    cls.decode(data[:-1], version)
            done += 1
    assert done > 300


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_fixed_layout_elements_with_and_without_tags(version: int) -> None:
    keys = [ApiVersion(api_key=k, min_version=k % 3, max_version=k + 1) for k in range(40)]
    plain = ApiVersionsResponse(api_keys=keys)
    assert ApiVersionsResponse.decode(plain.encode(version), version) == plain
    if version >= 3:
        tagged = [ApiVersion(api_key=k, max_version=2) for k in range(5)]
        tagged[3].unknown_tagged_fields = {7: b"xyz"}
        obj = ApiVersionsResponse(api_keys=tagged)
        back = ApiVersionsResponse.decode(obj.encode(version), version)
        assert back == obj and back.api_keys[3].unknown_tagged_fields == {7: b"xyz"}
        assert back.api_keys[4].unknown_tagged_fields == {}
        assert back.api_keys[2].unknown_tagged_fields is not back.api_keys[4].unknown_tagged_fields


def test_short_fixed_array_names_the_array() -> None:
    data = ApiVersionsResponse(api_keys=[ApiVersion(api_key=k) for k in range(10)]).encode(3)
    with pytest.raises(DecodeError) as info:
        ApiVersionsResponse.decode(data[:40], 3)
    assert "ApiKeys" in str(info.value)


def test_elements_are_fresh_objects() -> None:
    from kraftpy.protocol.messages.describe_quorum_response import (
        PartitionData,
        ReplicaState,
        TopicData,
    )

    obj = DescribeQuorumResponse(topics=[TopicData(topic_name="t", partitions=[PartitionData(
        current_voters=[ReplicaState(replica_id=i, log_end_offset=10 * i) for i in range(3)])])])
    back = DescribeQuorumResponse.decode(obj.encode(1), 1)
    voters = back.topics[0].partitions[0].current_voters
    assert [v.log_end_offset for v in voters] == [0, 10, 20]
    voters[0].log_end_offset = 5
    assert voters[1].log_end_offset == 10 and voters[0] != voters[1]


@pytest.mark.parametrize("count", [0, 1, 3, 63, 64, 200])
def test_uuid_arrays_known_unknown_and_long(count: int) -> None:
    from kraftpy.protocol.records.partition_record import PartitionRecord

    fresh = [uuid.uuid4() for _ in range(count)]
    rec = PartitionRecord(partition_id=1, topic_id=uuid.uuid4(), directories=fresh)
    data = rec.encode(2)
    first = PartitionRecord.decode(data, 2)  # ids not seen before
    again = PartitionRecord.decode(data, 2)  # ids now cached
    assert first == again == rec and first.directories == fresh
    if count:
        with pytest.raises(DecodeError):
            PartitionRecord.decode(data[: -1 - 16 * count + 5], 2)


def test_of_is_the_class_called_with_every_field() -> None:
    """`of` (positional, schema order) builds what the keyword constructor builds, for every
    class, nested ones included; it leaves nothing unset and shares no mutable default."""
    checked = 0
    for cls in generated_classes(top_only=False):
        values = {f.attr: _value(f, cls.VALID_VERSIONS[1]) for f in cls._FIELDS}
        made = cls.of(*values.values())
        assert made == cls(**values), cls.__name__
        assert all(getattr(made, attr) is value for attr, value in values.items())
        assert made.unknown_tagged_fields == {}
        assert made.unknown_tagged_fields is not cls.of(*values.values()).unknown_tagged_fields
        checked += 1
    assert checked > 200
