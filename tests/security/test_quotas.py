"""Connection limits and per-principal request quotas (sans-IO; the clock is a number)."""

from __future__ import annotations

import pytest
from kraftpy.controller.security.quotas import (
    UNLIMITED,
    ConnectionLimiter,
    LimitsConfigError,
    LimitSettings,
    RequestQuotas,
)

INIT_PRODUCER_ID, API_VERSIONS, BROKER_HEARTBEAT = 22, 18, 63


def test_defaults_are_unlimited() -> None:
    s = LimitSettings.from_properties({})
    assert s.max_connections == s.max_connections_per_ip == UNLIMITED
    assert s.request_rate is None and (s.window_num, s.window_size_s) == (11, 1)


def test_connection_limits() -> None:
    lim = ConnectionLimiter(LimitSettings.from_properties({
        "max.connections": "4", "max.connections.per.ip": "2",
        "max.connections.per.ip.overrides": "10.0.0.9:3, ::1:1"}))
    assert lim.try_acquire("10.0.0.1") is None
    assert lim.try_acquire("10.0.0.1") is None
    assert "max.connections.per.ip (2)" in (lim.try_acquire("10.0.0.1") or "")
    assert lim.try_acquire("10.0.0.9") is None
    assert lim.try_acquire("10.0.0.9") is None
    assert "max.connections (4)" in (lim.try_acquire("10.0.0.9") or "")
    lim.release("10.0.0.1")
    assert lim.try_acquire("10.0.0.9") is None  # the override allows a third
    assert lim.total == 4 and lim.per_ip == {"10.0.0.1": 1, "10.0.0.9": 3}
    lim.release("never-seen")  # harmless
    assert lim.total == 4
    assert lim.settings.per_ip_overrides["::1"] == 1
    # the CONTROLLER listener is not counted in max.connections, only per address
    assert lim.try_acquire("10.0.0.2", counted=False) is None
    assert lim.total == 4 and lim.per_ip["10.0.0.2"] == 1
    lim.release("10.0.0.2", counted=False)
    assert lim.total == 4 and "10.0.0.2" not in lim.per_ip


def test_under_quota_is_not_throttled() -> None:
    q = RequestQuotas(LimitSettings(request_rate=10.0))
    assert all(q.record("User:a", INIT_PRODUCER_ID, 1000 + i * 200) == 0 for i in range(50))


def test_over_quota_is_throttled_in_proportion() -> None:
    q = RequestQuotas(LimitSettings(request_rate=10.0))
    throttles = [q.record("User:a", INIT_PRODUCER_ID, 5000) for _ in range(300)]
    assert throttles[0] == 0
    assert throttles[150] > 0
    assert throttles[-1] > throttles[150]  # the further over, the longer the wait
    assert throttles[-1] <= 11000  # never longer than the whole quota window
    # another principal is measured on its own
    assert q.record("User:b", INIT_PRODUCER_ID, 5000) == 0


@pytest.mark.parametrize("quota", [5.0, 50.0])
def test_a_client_that_waits_its_throttle_runs_at_the_quota(quota: float) -> None:
    q = RequestQuotas(LimitSettings(request_rate=quota))
    now, sent = 0, 0
    while now < 60_000:
        now += q.record("User:a", INIT_PRODUCER_ID, now) + 1
        sent += 1
    assert 0.8 * quota <= sent / 60 <= 1.25 * quota


def test_exempt_apis_and_overrides() -> None:
    s = LimitSettings.from_properties({
        "quota.request.rate.per.principal": "1",
        "quota.request.rate.overrides": "User:CN=svc,O=Acme=1000; User:bulk=0.5"})
    q = RequestQuotas(s)
    assert q.quota_for("User:CN=svc,O=Acme") == 1000.0 and q.quota_for("User:bulk") == 0.5
    assert all(q.record("User:x", API_VERSIONS, 0) == 0 for _ in range(100))
    assert all(q.record("User:x", BROKER_HEARTBEAT, 0) == 0 for _ in range(100))
    assert all(q.record("User:CN=svc,O=Acme", INIT_PRODUCER_ID, 0) == 0 for _ in range(100))


@pytest.mark.parametrize(("props", "key"), [
    ({"max.connections": "-1"}, "max.connections"),
    ({"max.connections.per.ip": "x"}, "max.connections.per.ip"),
    ({"max.connections.per.ip.overrides": "hostonly"}, "overrides"),
    ({"quota.request.rate.per.principal": "0"}, "quota.request.rate.per.principal"),
    ({"quota.request.rate.per.principal": "nan"}, "quota.request.rate.per.principal"),
    ({"quota.request.rate.overrides": "alice=3"}, "quota.request.rate.overrides"),
    ({"quota.window.num": "1"}, "quota.window.num"),
])
def test_bad_limit_settings_are_named(props: dict[str, str], key: str) -> None:
    with pytest.raises(LimitsConfigError, match=key):
        LimitSettings.from_properties(props)
