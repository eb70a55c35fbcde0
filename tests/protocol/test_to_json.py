"""The generated per-version to_json gives exactly what the generic field-spec walk gives, for
every class and version, with every field set and with every field at its default."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraftpy.protocol.message import FieldSpec, Message, generic_to_json
from support.generated import generated_classes, versions

_SCALARS: dict[str, Any] = {
    "bool": True, "int8": -7, "int16": 300, "uint16": 65000, "int32": -70000, "uint32": 4_000_000_000,
    "int64": 1 << 40, "float64": 2.5, "string": "héllo", "bytes": b"\x00\xfb\xff+/",
    "records": b"\x01\x02\x03", "uuid": uuid.UUID(int=0xFBFF << 100 | 77),
}


def _value(f: FieldSpec, depth: int) -> Any:
    if f.kind == "struct":
        return _filled(f.struct, depth + 1)
    if f.kind == "array":
        if f.elem == "struct":
            return [_filled(f.struct, depth + 1), f.struct()]
        return [_SCALARS[f.elem], _SCALARS[f.elem]]
    return _SCALARS[f.kind]


def _filled(cls: type[Message], depth: int = 0) -> Message:
    return cls(**{f.attr: _value(f, depth) for f in cls._FIELDS})


def _nulled(cls: type[Message]) -> Message:
    obj = cls()
    for f in cls._FIELDS:
        if f.nullable is not None:
            setattr(obj, f.attr, None)
    return obj


CASES = [(cls, v) for cls in generated_classes() for v in versions(cls)]


def test_every_class_has_a_converter_per_version() -> None:
    assert len(CASES) > 300
    for cls, version in CASES:
        assert version in cls.__dict__["_JSON"], (cls.__name__, version)


@pytest.mark.parametrize("make", [_filled, lambda cls: cls(), _nulled], ids=["filled", "default", "nulls"])
def test_generated_matches_the_field_walk(make: Any) -> None:
    checked = 0
    for cls, version in CASES:
        obj = make(cls)
        got = obj.to_json(version)
        assert got == generic_to_json(obj, version), (cls.__name__, version)
        assert list(got) == list(generic_to_json(obj, version)), (cls.__name__, version)
        checked += 1
    assert checked == len(CASES)


def test_tagged_fields_only_when_not_default() -> None:
    from kraftpy.protocol.records.partition_record import PartitionRecord

    plain = PartitionRecord(partition_id=1, topic_id=uuid.UUID(int=1)).to_json(2)
    assert "eligibleLeaderReplicas" not in plain and "leaderRecoveryState" not in plain
    tagged = PartitionRecord(eligible_leader_replicas=[3], leader_recovery_state=1).to_json(2)
    assert tagged["eligibleLeaderReplicas"] == [3] and tagged["leaderRecoveryState"] == 1
    assert tagged["topicId"] == "AAAAAAAAAAAAAAAAAAAAAA"
    assert list(tagged)[7] == "leaderRecoveryState"  # schema order, tagged fields in place


def test_uuid_and_bytes_text() -> None:
    from kraftpy.protocol.uuid import kafka_uuid_str

    cls = next(c for c, _ in CASES if any(f.kind == "uuid" for f in c._FIELDS))
    f = next(f for f in cls._FIELDS if f.kind == "uuid")
    obj = cls(**{f.attr: _SCALARS["uuid"]})
    text = obj.to_json(f.versions[1] if f.versions[1] <= cls.VALID_VERSIONS[1] else cls.VALID_VERSIONS[1])
    assert text[f.json] == kafka_uuid_str(_SCALARS["uuid"])
    assert "-" in text[f.json] or "_" in text[f.json]  # base64url, not standard base64
