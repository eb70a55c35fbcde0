"""Connection limits and per-principal request quotas, in Kafka's terms and property names.

Connections: `max.connections` (client listeners) and `max.connections.per.ip` with
`max.connections.per.ip.overrides` (`host:count,...`). A
connection beyond a limit is accepted and closed at once, before a byte is read, so the
sessions already established never notice.

Requests: `quota.request.rate.per.principal` (requests per second, default unlimited) with
`quota.request.rate.overrides` (`User:alice=100;User:bob=5`), measured as Kafka's quota Rate
over `quota.window.num` windows of `quota.window.size.seconds`. A principal over its quota
is answered normally, with ThrottleTimeMs set to how long it must wait to be back under it,
and its connection is not read again until then (KIP-219): slowed, never dropped.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from kraftpy.controller.properties import default

UNLIMITED = 2**31 - 1
# APIs a quota never throttles: the handshake and the broker/raft RPCs a cluster lives by
# (Kafka exempts cluster actions from request quotas).
EXEMPT_API_KEYS = frozenset({17, 18, 36, 1, 52, 53, 54, 56, 59, 62, 63, 64, 67, 70, 73})


class LimitsConfigError(ValueError):
    """A limit setting that cannot run; the message names the key."""


def _int(props: Mapping[str, str], key: str, default: int) -> int:
    raw = props.get(key)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise LimitsConfigError(f"{key}: {raw!r} is not an integer") from None
    if value < 0:
        raise LimitsConfigError(f"{key}: {value} is negative")
    return value


def _float(raw: str, key: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise LimitsConfigError(f"{key}: {raw!r} is not a number") from None
    if not value > 0 or math.isinf(value) or math.isnan(value):
        raise LimitsConfigError(f"{key}: {raw!r} must be a positive number")
    return value


@dataclass(frozen=True)
class LimitSettings:
    max_connections: int = int(default("max.connections"))
    max_connections_per_ip: int = int(default("max.connections.per.ip"))
    per_ip_overrides: dict[str, int] = field(default_factory=dict)
    request_rate: float | None = None
    request_rate_overrides: dict[str, float] = field(default_factory=dict)
    window_num: int = int(default("quota.window.num"))
    window_size_s: int = int(default("quota.window.size.seconds"))

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LimitSettings:
        overrides: dict[str, int] = {}
        raw = props.get("max.connections.per.ip.overrides",
                        default("max.connections.per.ip.overrides"))
        for item in (x.strip() for x in raw.split(",")):
            if not item:
                continue
            host, sep, count = item.rpartition(":")
            if not sep or not host or not count.strip().isdigit():
                raise LimitsConfigError(
                    f"max.connections.per.ip.overrides: {item!r} is not host:count")
            overrides[host.strip()] = int(count)
        rate_raw = props.get("quota.request.rate.per.principal", "").strip()
        rates: dict[str, float] = {}
        overrides_raw = props.get("quota.request.rate.overrides",
                                  default("quota.request.rate.overrides"))
        for item in (x.strip() for x in overrides_raw.split(";")):
            if not item:
                continue
            principal, sep, value = item.rpartition("=")
            if not sep or ":" not in principal:
                raise LimitsConfigError(
                    f"quota.request.rate.overrides: {item!r} is not Type:name=rate")
            rates[principal.strip()] = _float(value, "quota.request.rate.overrides")
        window_num = _int(props, "quota.window.num", cls.window_num)
        window_size = _int(props, "quota.window.size.seconds", cls.window_size_s)
        if window_num < 2 or window_size < 1:
            raise LimitsConfigError("quota.window.num must be >= 2 and "
                                    "quota.window.size.seconds >= 1")
        return cls(
            max_connections=_int(props, "max.connections", cls.max_connections),
            max_connections_per_ip=_int(props, "max.connections.per.ip",
                                        cls.max_connections_per_ip),
            per_ip_overrides=overrides,
            request_rate=_float(rate_raw, "quota.request.rate.per.principal") if rate_raw
            else None,
            request_rate_overrides=rates,
            window_num=window_num,
            window_size_s=window_size,
        )


class ConnectionLimiter:
    """Counts open connections, in total and per client address.

    `max.connections` counts client-listener connections only: like Kafka's inter-broker
    listener, the CONTROLLER listener stays reachable for brokers during a client flood.
    `max.connections.per.ip` counts every listener.
    """

    def __init__(self, settings: LimitSettings) -> None:
        self.settings = settings
        self.total = 0
        self.per_ip: dict[str, int] = {}

    def _ip_limit(self, ip: str) -> int:
        return self.settings.per_ip_overrides.get(ip, self.settings.max_connections_per_ip)

    def try_acquire(self, ip: str, *, counted: bool = True) -> str | None:
        """Take a slot for a new connection, or say why there is none (then close it)."""
        if counted and self.total >= self.settings.max_connections:
            return f"max.connections ({self.settings.max_connections}) reached"
        if self.per_ip.get(ip, 0) >= self._ip_limit(ip):
            return f"max.connections.per.ip ({self._ip_limit(ip)}) reached for {ip}"
        self.total += counted
        self.per_ip[ip] = self.per_ip.get(ip, 0) + 1
        return None

    def release(self, ip: str, *, counted: bool = True) -> None:
        count = self.per_ip.get(ip, 0)
        if count <= 0:
            return
        self.total -= counted
        if count == 1:
            del self.per_ip[ip]
        else:
            self.per_ip[ip] = count - 1


class _Rate:
    """Kafka's windowed Rate: events over `num` windows, the young ones counted as full."""

    def __init__(self, num: int, size_ms: int) -> None:
        self.num, self.size_ms = num, size_ms
        self.windows: deque[list[int]] = deque()  # [start_ms, count]

    def record(self, now_ms: int) -> None:
        if not self.windows or now_ms >= self.windows[-1][0] + self.size_ms:
            start = now_ms - (now_ms % self.size_ms)
            self.windows.append([start, 0])
        self.windows[-1][1] += 1
        while self.windows and self.windows[0][0] <= now_ms - self.num * self.size_ms:
            self.windows.popleft()

    def measure(self, now_ms: int) -> tuple[float, float]:
        """(events per second, elapsed seconds the rate is taken over)."""
        total = sum(c for s, c in self.windows if s > now_ms - self.num * self.size_ms)
        oldest = self.windows[0][0] if self.windows else now_ms
        elapsed_ms = max(now_ms - oldest, (self.num - 1) * self.size_ms)
        return total / (elapsed_ms / 1000), elapsed_ms / 1000


class RequestQuotas:
    """Per-principal request rates; `record` returns the throttle time owed, in ms."""

    def __init__(self, settings: LimitSettings) -> None:
        self.settings = settings
        self._rates: dict[str, _Rate] = {}

    def quota_for(self, principal: str) -> float | None:
        return self.settings.request_rate_overrides.get(principal, self.settings.request_rate)

    def record(self, principal: str, api_key: int, now_ms: int) -> int:
        quota = self.quota_for(principal)
        if quota is None or api_key in EXEMPT_API_KEYS:
            return 0
        rate = self._rates.get(principal)
        if rate is None:
            rate = self._rates[principal] = _Rate(self.settings.window_num,
                                                  self.settings.window_size_s * 1000)
        rate.record(now_ms)
        observed, elapsed_s = rate.measure(now_ms)
        if observed <= quota:
            return 0
        # Kafka's ClientQuotaManager.throttleTime: how long until the rate is back at quota.
        throttle_ms = (observed - quota) / quota * elapsed_s * 1000
        cap = self.settings.window_num * self.settings.window_size_s * 1000
        return int(min(math.ceil(throttle_ms), cap))
