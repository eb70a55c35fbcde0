"""Kafka's controller.quorum.* settings, as the Raft core is told them (QuorumConfig).

The core reads no properties file: the node maps the keys below onto `RaftConfig`, and
`RaftConfig.from_properties` does that with Kafka's defaults and bounds, naming the key of
any bad value, so a typo stops the node instead of running with a surprise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kraftpy.controller.properties import default

PREFIX = "controller.quorum."
# KafkaRaftClient's fixed sizes and the broker's replica.fetch.wait.max.ms default.
MAX_FETCH_BYTES = 8 * 1024 * 1024
MAX_BATCH_BYTES = 8 * 1024 * 1024
FETCH_MAX_WAIT_MS = 500
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5


class RaftConfigError(ValueError):
    """A controller.quorum.* value Kafka would refuse; the message names the key."""


@dataclass(frozen=True, kw_only=True)
class RaftConfig:
    election_timeout_ms: int = int(default(PREFIX + "election.timeout.ms"))
    fetch_timeout_ms: int = int(default(PREFIX + "fetch.timeout.ms"))
    election_backoff_max_ms: int = int(default(PREFIX + "election.backoff.max.ms"))
    append_linger_ms: int = int(default(PREFIX + "append.linger.ms"))
    request_timeout_ms: int = int(default(PREFIX + "request.timeout.ms"))
    retry_backoff_ms: int = int(default(PREFIX + "retry.backoff.ms"))
    fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS

    @property
    def check_quorum_timeout_ms(self) -> int:
        """A leader that hears from no majority for this long resigns (1.5x fetch timeout)."""
        return int(self.fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)

    @property
    def begin_quorum_epoch_interval_ms(self) -> int:
        return self.fetch_timeout_ms // 2

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RaftConfig:
        """Kafka's keys, defaults and lower bounds (all at least 0)."""
        names = {
            "election.timeout.ms": "election_timeout_ms",
            "fetch.timeout.ms": "fetch_timeout_ms",
            "election.backoff.max.ms": "election_backoff_max_ms",
            "append.linger.ms": "append_linger_ms",
            "request.timeout.ms": "request_timeout_ms",
            "retry.backoff.ms": "retry_backoff_ms",
        }
        values: dict[str, int] = {}
        for key, attr in names.items():
            text = props.get(PREFIX + key)
            if text is None:
                continue
            try:
                value = int(text.strip())
            except ValueError:
                raise RaftConfigError(
                    f"{PREFIX}{key}: {text!r} is not an integer") from None
            if not 0 <= value <= 2**31 - 1:
                raise RaftConfigError(f"{PREFIX}{key}: {value} is outside [0, 2147483647]")
            values[attr] = value
        return cls(**values)


def parse_voters(text: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters` ("id@host:port,..."): id -> (host, port), Kafka's syntax;
    `RaftConfigError` names the entry it cannot read."""
    voters: dict[int, tuple[str, int]] = {}
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        ident, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        try:
            node_id, port_number = int(ident), int(port)
        except ValueError:
            node_id = port_number = -1
        if not at or not colon or not host or node_id < 0 or not 0 < port_number <= 65535:
            raise RaftConfigError(f"{PREFIX}voters: {item!r} is not id@host:port")
        if node_id in voters:
            raise RaftConfigError(f"{PREFIX}voters: voter {node_id} is named twice")
        voters[node_id] = (host.strip("[]"), port_number)
    return voters
