"""Every error code Kafka 4.1 defines has its name, so no tool prints a code as "unknown"."""

from __future__ import annotations

from kraftpy.protocol.error_codes import ErrorCode, error_name
from kraftpy.tools.broker_sim import BrokerError


def test_every_kafka_41_code_has_a_name() -> None:
    # Kafka 4.1's Errors run from UNKNOWN_SERVER_ERROR (-1) to SHARE_SESSION_LIMIT_REACHED
    # (133) without a hole.
    assert sorted(ErrorCode) == list(range(-1, 134))
    assert (ErrorCode(114).name, ErrorCode(115).name) == (
        "MISMATCHED_ENDPOINT_TYPE", "UNSUPPORTED_ENDPOINT_TYPE")
    assert (ErrorCode(1).name, ErrorCode(3).name, ErrorCode(100).name, ErrorCode(133).name) == (
        "OFFSET_OUT_OF_RANGE", "UNKNOWN_TOPIC_OR_PARTITION", "UNKNOWN_TOPIC_ID",
        "SHARE_SESSION_LIMIT_REACHED")


def test_a_code_beyond_kafka_41_is_still_named_with_its_number() -> None:
    assert error_name(77) == "STALE_BROKER_EPOCH"
    assert error_name(500) == "UNKNOWN_ERROR_500"


def test_broker_sim_errors_carry_the_name() -> None:
    assert str(BrokerError("DescribeCluster", 114)) == (
        "DescribeCluster: error 114 (MISMATCHED_ENDPOINT_TYPE)")
    for code in range(-1, 134):
        assert str(BrokerError("X", code)) == f"X: error {code} ({ErrorCode(code).name})"
