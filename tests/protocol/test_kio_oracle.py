"""Byte identity with kio, for every API key and version in our registry (and the KRaft
control records): kio's random messages decode with ours and re-encode to the same bytes, and
what we encode kio reads back as the value it started from."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.protocol.messages.k_raft_version_record import KRaftVersionRecord
from kraftpy.protocol.messages.leader_change_message import LeaderChangeMessage
from kraftpy.protocol.messages.request_header import RequestHeader
from kraftpy.protocol.messages.response_header import ResponseHeader
from kraftpy.protocol.messages.snapshot_footer_record import SnapshotFooterRecord
from kraftpy.protocol.messages.snapshot_header_record import SnapshotHeaderRecord
from kraftpy.protocol.messages.voters_record import VotersRecord
from kraftpy.protocol.registry import API_KEYS
from support.kafka_strategies import message_strategy
from support.kio_oracle import kio_class, kio_encode, kio_reads_back

EXTRA = (RequestHeader, ResponseHeader, LeaderChangeMessage, SnapshotHeaderRecord,
         SnapshotFooterRecord, KRaftVersionRecord, VotersRecord)


def _cases() -> list[tuple[type, int]]:
    out = []
    for spec in API_KEYS.values():
        for cls in (spec.request, spec.response):
            out += [(cls, v) for v in range(spec.valid_versions[0], spec.valid_versions[1] + 1)]
    for cls in EXTRA:
        out += [(cls, v) for v in range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)]
    return out


CASES = _cases()
KIO_CASES = [(c, v) for c, v in CASES if kio_class(c, v) is not None]
SETTINGS = settings(max_examples=10, deadline=None,
                    suppress_health_check=list(HealthCheck))


def test_kio_covers_our_registry() -> None:
    missing = [(c.__name__, v) for c, v in CASES if kio_class(c, v) is None]
    # kio 0.6.5 has every version we define except RequestHeader v0 (ControlledShutdown v0 only)
    assert missing == [("RequestHeader", 0)]
    assert len(CASES) >= 270


@pytest.mark.parametrize(("cls", "version"), KIO_CASES,
                         ids=[f"{c.__name__}-v{v}" for c, v in KIO_CASES])
def test_kio_bytes_decode_and_reencode(cls: type, version: int) -> None:
    kcls = kio_class(cls, version)

    @SETTINGS
    @given(st.from_type(kcls))
    def check(value: object) -> None:
        data = kio_encode(kcls, value)
        ours = cls.decode(data, version)
        again = ours.encode(version)
        assert again == data
        assert kio_reads_back(kcls, again, value)

    check()


@pytest.mark.parametrize(("cls", "version"), CASES, ids=[f"{c.__name__}-v{v}" for c, v in CASES])
def test_our_random_values_round_trip_with_unknown_tags(cls: type, version: int) -> None:
    """Our own values (unknown tagged fields included, which kio refuses) survive encode/decode."""

    @settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
    @given(message_strategy(cls, version, unknown_tags=True))
    def check(value: object) -> None:
        data = value.encode(version)
        back = cls.decode(data, version)
        assert back == value
        assert back.encode(version) == data

    check()
