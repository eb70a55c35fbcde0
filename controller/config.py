"""Server configuration: a Kafka-style properties file, `--override key=value`, typed settings.

Property names are Kafka's, so an operator's `server.properties` reads the same here. Every
value is checked once, at startup, and a bad one stops the server with a message naming the
key, never a traceback at the first request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from kraftpy.controller.properties import default
from kraftpy.controller.settings import TxnTopicSettings

# What a bare `kraftpy serve` runs with: one node in combined mode on loopback.
EMBEDDED_DEFAULTS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": (
        "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL"
    ),
    "metadata.log.dir": "./kraftpy-data",
}

# The settings filled in here when unset, with the defaults of `properties.py` (Kafka's).
KAFKA_DEFAULTS: dict[str, str] = {name: default(name) for name in (
    "broker.session.timeout.ms",
    "broker.heartbeat.interval.ms",
    "transaction.max.timeout.ms",
    "socket.request.max.bytes",
    "queued.max.request.bytes",
    "connections.max.idle.ms",
    "metadata.log.segment.bytes",
    "metadata.log.segment.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms",
    "metadata.max.idle.interval.ms",
    "producer.id.allocation.quota.per.broker",
)}

# The __transaction_state topic's settings (TransactionLogConfig), Kafka's defaults when unset.
TXN_TOPIC_KEYS = {
    "transaction.state.log.num.partitions": "num_partitions",
    "transaction.state.log.min.isr": "min_isr",
    "transaction.state.log.segment.bytes": "segment_bytes",
}

SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the offending key."""


@dataclass(frozen=True)
class Endpoint:
    """One `NAME://host:port` entry of `listeners` or `advertised.listeners`."""

    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class ServerConfig:
    properties: dict[str, str]
    node_id: int
    process_roles: tuple[str, ...]
    listeners: tuple[Endpoint, ...]
    advertised_listeners: tuple[Endpoint, ...]
    controller_listener_names: tuple[str, ...]
    security_protocol_map: dict[str, str]
    metadata_log_dir: Path
    broker_session_timeout_ms: int
    broker_heartbeat_interval_ms: int
    transaction_max_timeout_ms: int
    socket_request_max_bytes: int
    connections_max_idle_ms: int
    metadata_log_segment_bytes: int
    snapshot_max_record_bytes: int
    snapshot_interval_ms: int
    metadata_max_idle_interval_ms: int
    producer_id_quota_per_broker: float
    metadata_log_segment_ms: int = 7 * 24 * 60 * 60 * 1000
    queued_max_request_bytes: int = -1  # <= 0: unbounded, as in Kafka
    # Kafka's metadata.max.retention.bytes / .ms (-1: no limit). None (neither set): every
    # new snapshot deletes the segments wholly below it and all but one older snapshot.
    metadata_max_retention_bytes: int | None = None
    metadata_max_retention_ms: int | None = None
    # transaction.state.log.num.partitions, .min.isr, .segment.bytes (Kafka's defaults).
    txn_topic: TxnTopicSettings = field(default_factory=TxnTopicSettings)
    extra: dict[str, str] = field(default_factory=dict)

    def is_controller_listener(self, name: str) -> bool:
        return name in self.controller_listener_names

    def security_protocol(self, listener: str) -> str:
        return self.security_protocol_map[listener]

    def advertised(self, listener: str) -> Endpoint:
        """Where clients reach this node on `listener` (advertised, else the bound address)."""
        for ep in self.advertised_listeners:
            if ep.name == listener:
                return ep
        for ep in self.listeners:
            if ep.name == listener:
                return ep
        raise KeyError(listener)

    def with_bound_ports(self, bound: Mapping[str, int]) -> ServerConfig:
        """Replace port 0 (ask the OS) in listeners and advertised listeners by the real port."""

        def fix(eps: tuple[Endpoint, ...]) -> tuple[Endpoint, ...]:
            return tuple(
                Endpoint(e.name, e.host, bound.get(e.name, e.port)) if e.port == 0 else e
                for e in eps
            )

        return replace(self, listeners=fix(self.listeners),
                       advertised_listeners=fix(self.advertised_listeners))


# --- Java properties text -------------------------------------------------------------------

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6] or ""):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _split_key(line: str) -> tuple[str, str]:
    """Split at the first unescaped `=`, `:` or whitespace, as java.util.Properties does."""
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=:" or ch.isspace():
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return _unescape(key), _unescape(rest)


def parse_properties(text: str) -> dict[str, str]:
    """Parse java.util.Properties text: comments, separators, continuations, escapes."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd run of backslashes continues the line
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        if line:
            key, value = _split_key(line)
            props[key] = value
    if pending:
        key, value = _split_key(pending)
        props[key] = value
    return props


def parse_override(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--override expects key=value, got {item!r}")
    return key.strip(), value.strip()


# --- typed settings --------------------------------------------------------------------------

_ENDPOINT = re.compile(r"^(?P<name>[A-Za-z0-9_]+)://(?P<host>\[[^\]]*\]|[^:/]*):(?P<port>-?\d+)$")


def parse_endpoints(key: str, value: str) -> tuple[Endpoint, ...]:
    eps: list[Endpoint] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _ENDPOINT.match(item)
        if m is None:
            raise ConfigError(f"{key}: {item!r} is not NAME://host:port")
        port = int(m["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(f"{key}: port {port} of {m['name']} is out of range")
        host = m["host"].strip("[]")
        eps.append(Endpoint(m["name"].upper(), host, port))
    names = [e.name for e in eps]
    if len(set(names)) != len(names):
        raise ConfigError(f"{key}: each listener name may appear once ({value!r})")
    return tuple(eps)


def _int(props: Mapping[str, str], key: str, *, minimum: int = 0) -> int:
    raw = props[key]
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{key}: {value} is below the minimum {minimum}")
    return value


def _optional_int(props: Mapping[str, str], key: str) -> int | None:
    return _int(props, key, minimum=-1) if key in props else None


def _float(props: Mapping[str, str], key: str) -> float:
    raw = props[key]
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(f"{key}: {raw!r} is not a number") from None
    if value < 0:
        raise ConfigError(f"{key}: {value} is negative")
    return value


def _csv(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def build_config(props: Mapping[str, str]) -> ServerConfig:
    """Typed, validated settings from merged properties (defaults filled in here)."""
    merged = {**KAFKA_DEFAULTS, **props}
    for required in ("process.roles", "node.id", "listeners", "controller.listener.names"):
        if not merged.get(required, "").strip():
            raise ConfigError(f"{required} is required")
    roles = _csv(merged["process.roles"])
    bad_roles = set(roles) - {"broker", "controller"}
    if bad_roles or "controller" not in roles:
        raise ConfigError(
            f"process.roles: {merged['process.roles']!r}; kraftpy runs 'controller' "
            "or 'broker,controller'"
        )
    protocol_map: dict[str, str] = {}
    for pair in _csv(merged.get("listener.security.protocol.map",
                                default("listener.security.protocol.map"))):
        name, sep, proto = pair.partition(":")
        if not sep or proto.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"listener.security.protocol.map: bad entry {pair!r}")
        protocol_map[name.strip().upper()] = proto.strip().upper()
    listeners = parse_endpoints("listeners", merged["listeners"])
    advertised = parse_endpoints("advertised.listeners", merged.get("advertised.listeners", ""))
    names = {e.name for e in listeners}
    for ep in listeners:
        if ep.name not in protocol_map:
            if ep.name in SECURITY_PROTOCOLS:
                protocol_map[ep.name] = ep.name
            else:
                raise ConfigError(
                    f"listeners: {ep.name} has no entry in listener.security.protocol.map"
                )
    for ep in advertised:
        if ep.name not in names:
            raise ConfigError(f"advertised.listeners: {ep.name} is not in listeners")
    controller_names = tuple(n.upper() for n in _csv(merged["controller.listener.names"]))
    for n in controller_names:
        if n not in names:
            raise ConfigError(f"controller.listener.names: {n} is not in listeners")
    if "broker" in roles and not names - set(controller_names):
        raise ConfigError("process.roles includes broker but listeners has no client listener")
    log_dir = merged.get("metadata.log.dir") or _csv(merged.get("log.dirs", ""))[:1]
    if not log_dir:
        raise ConfigError("metadata.log.dir (or log.dirs) is required")
    if isinstance(log_dir, tuple):
        log_dir = log_dir[0]
    node_id = _int(merged, "node.id")
    request_max = _int(merged, "socket.request.max.bytes", minimum=1)
    queued_max = _int(merged, "queued.max.request.bytes", minimum=-(1 << 63))
    if 0 < queued_max < request_max:
        raise ConfigError(f"queued.max.request.bytes: {queued_max} must be larger or equal "
                          f"to socket.request.max.bytes ({request_max}), or -1 for no bound")
    known = set(KAFKA_DEFAULTS) | set(EMBEDDED_DEFAULTS) | set(TXN_TOPIC_KEYS) | {
        "advertised.listeners", "log.dirs", "metadata.max.retention.bytes",
        "metadata.max.retention.ms"}
    txn_topic = TxnTopicSettings(**{field_name: _int(merged, key, minimum=1)
                                    for key, field_name in TXN_TOPIC_KEYS.items()
                                    if key in merged})
    return ServerConfig(
        properties=dict(merged),
        node_id=node_id,
        process_roles=roles,
        listeners=listeners,
        advertised_listeners=advertised,
        controller_listener_names=controller_names,
        security_protocol_map=protocol_map,
        metadata_log_dir=Path(log_dir),
        broker_session_timeout_ms=_int(merged, "broker.session.timeout.ms", minimum=1),
        broker_heartbeat_interval_ms=_int(merged, "broker.heartbeat.interval.ms", minimum=1),
        transaction_max_timeout_ms=_int(merged, "transaction.max.timeout.ms", minimum=1),
        socket_request_max_bytes=request_max,
        queued_max_request_bytes=queued_max,
        connections_max_idle_ms=_int(merged, "connections.max.idle.ms", minimum=1),
        metadata_log_segment_bytes=_int(merged, "metadata.log.segment.bytes", minimum=1024),
        snapshot_max_record_bytes=_int(
            merged, "metadata.log.max.record.bytes.between.snapshots", minimum=1
        ),
        snapshot_interval_ms=_int(merged, "metadata.log.max.snapshot.interval.ms"),
        metadata_max_idle_interval_ms=_int(merged, "metadata.max.idle.interval.ms"),
        producer_id_quota_per_broker=_float(merged, "producer.id.allocation.quota.per.broker"),
        metadata_log_segment_ms=_int(merged, "metadata.log.segment.ms", minimum=1),
        metadata_max_retention_bytes=_optional_int(merged, "metadata.max.retention.bytes"),
        metadata_max_retention_ms=_optional_int(merged, "metadata.max.retention.ms"),
        txn_topic=txn_topic,
        extra={k: v for k, v in merged.items() if k not in known},
    )


def load_config(
    path: str | Path | None = None, overrides: Iterable[str] = ()
) -> ServerConfig:
    """The embedded default (no file) or a properties file, then each `key=value` override."""
    if path is None:
        props = dict(EMBEDDED_DEFAULTS)
    else:
        try:
            props = parse_properties(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    for item in overrides:
        key, value = parse_override(item)
        props[key] = value
    return build_config(props)
