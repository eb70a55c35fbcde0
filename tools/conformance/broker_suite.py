"""Running the broker suite: each check in its own session, a result per check.

`kraftpy conformance --broker HOST:PORT`, or from Python `run_broker_checks(BrokerTarget(...))`.
A result says the check's KIP and rule, PASS or FAIL, what was expected and what came back
when it failed, and every answer it observed on the way (the same values on two clusters
mean the same behaviour).
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftpy.protocol.errors import DecodeError
from kraftpy.tools.conformance import idempotence, kip360, kip447, transactions
from kraftpy.tools.conformance.broker import (
    BROKER_CHECKS,
    BrokerCheck,
    BrokerTarget,
    CheckFailed,
    Session,
)
from kraftpy.tools.kafka_connection import ClientError

# The suite in the order it runs: idempotence, then what KIP-360 adds to it, then
# transactions, then KIP-447's offsets in transactions.
BROKER_SUITE: list[BrokerCheck] = [
    c for module in (idempotence, kip360, transactions, kip447)
    for c in BROKER_CHECKS if c.run.__module__ == module.__name__]

@dataclass
class BrokerCheckResult:
    check: str  # the slug, e.g. "idempotence-retry"
    kip: str
    rule: str
    status: str  # "pass" | "fail"
    expected: Any = None
    actual: Any = None
    detail: str = ""
    seconds: float = 0.0
    observed: dict[str, Any] = field(default_factory=dict)
    cleanup: list[str] = field(default_factory=list)  # what could not be cleaned up

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "kip": self.kip, "rule": self.rule,
                "status": self.status, "expected": _plain(self.expected),
                "actual": _plain(self.actual), "detail": self.detail,
                "seconds": round(self.seconds, 3), "observed": _plain(self.observed),
                "cleanup": self.cleanup}


def _plain(value: Any) -> Any:
    """JSON-ready: tuples as lists, bytes as text."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return value


def run_broker_checks(target: BrokerTarget,
                      select: Callable[[BrokerCheck], bool] = lambda _: True
                      ) -> list[BrokerCheckResult]:
    """Run the checks `select` picks, in the suite's order."""
    results = []
    for c in BROKER_SUITE:
        if not select(c):
            continue
        started = time.monotonic()
        result = BrokerCheckResult(c.slug, c.kip, c.rule, "pass")
        session = Session(target, c.slug, c.timeout_scale)
        try:
            with session:
                c.run(session)
        except CheckFailed as exc:
            result.status, result.detail = "fail", str(exc)
            result.expected, result.actual = exc.expected, exc.actual
        except ClientError as exc:  # the connection failed: its message says all there is
            result.status, result.detail = "fail", f"{type(exc).__name__}: {exc}"
        except DecodeError as exc:
            result.status, result.detail = "fail", f"an answer that does not decode: {exc}"
        except Exception as exc:
            result.status = "fail"
            result.detail = f"{type(exc).__name__}: {exc}\n" + "".join(
                traceback.format_exception(exc)[-3:])
        result.observed = session.observed
        result.cleanup = session.cleanup_errors
        result.seconds = time.monotonic() - started
        results.append(result)
    return results
