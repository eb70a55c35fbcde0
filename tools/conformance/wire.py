"""The suite's connection, kept importable under its old name: it is `KafkaConnection`."""

from __future__ import annotations

from kraftpy.tools.kafka_connection import (
    Closed,
    KafkaConnection,
    NoAnswer,
    parse_address,
)

__all__ = ["Closed", "Connection", "NoAnswer", "parse_address"]


class Connection(KafkaConnection):
    """`Connection(address, timeout)`: a PLAINTEXT `KafkaConnection` named for the suite."""

    def __init__(self, address: tuple[str, int], timeout: float = 5.0,
                 client_id: str = "kraftpy-conformance") -> None:
        super().__init__(address, timeout=timeout, client_id=client_id)
