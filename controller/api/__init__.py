"""The request handlers, one module per API key, and the registry the server routes by.

Each handler module opens with the same header (versions served, listeners, behaviour, what is
skipped) and defines `API_KEY`, `VERSIONS`, `LISTENERS`, `REQUEST` and `async handle(node,
request, ctx)`. The ApiVersions answer is derived from this registry per listener type, so what
is advertised is exactly what is served.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from kraftpy.controller.config import ServerConfig

_log = logging.getLogger(__name__)

# Kafka's listener types (RequestListenerType): a client listener serves the "broker" APIs.
BROKER = "broker"
CONTROLLER = "controller"

MODULES = (
    "api_versions",
    "metadata",
    "find_coordinator",
    "init_producer_id",
    "describe_cluster",
    "describe_quorum",
    "describe_producers",
    "describe_transactions",
    "list_transactions",
    "broker_registration",
    "broker_heartbeat",
    "unregister_broker",
    "controller_registration",
    "allocate_producer_ids",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "fetch",
    "fetch_snapshot",
    "vote",
    "begin_quorum_epoch",
    "end_quorum_epoch",
    "update_features",
    "create_topics",
    "delete_topics",
    "create_partitions",
    "describe_configs",
    "alter_configs",
    "incremental_alter_configs",
    "list_partition_reassignments",
    "alter_partition_reassignments",
    "alter_partition",
    "elect_leaders",
    "assign_replicas_to_dirs",
    "envelope",
    "add_raft_voter",
    "remove_raft_voter",
    "update_raft_voter",
)


@dataclass(frozen=True)
class RequestContext:
    """Who sent a request and where: what authorization and auditing need to know."""

    listener: str
    listener_type: str
    security_protocol: str
    client_host: str
    client_port: int
    principal: str = "User:ANONYMOUS"
    client_id: str = ""
    correlation_id: int = -1
    api_key: int = -1
    api_version: int = -1


class Node(Protocol):
    """What a handler may use of the running node. A node may also offer
    `take_idempotent_ids(count)` and a `quick_table` (`RunningNode`), which quick answers use
    (`quick.py`); without them there are none."""

    config: ServerConfig
    cluster_id: str

    async def submit(self, request: Any, api_version: int, ctx: RequestContext) -> Any:
        """Run a request through the controller; returns its response once it may be sent."""

    def describe(self) -> dict[str, Any]: ...

    def features(self) -> Features: ...


@dataclass(frozen=True)
class ApiHandler:
    api_key: int
    name: str
    versions: tuple[int, int]
    listeners: frozenset[str]
    request_class: type
    handle: Callable[[Node, Any, RequestContext], Awaitable[Any]]

    def serves(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]


@cache
def handlers() -> dict[int, ApiHandler]:
    table: dict[int, ApiHandler] = {}
    for name in MODULES:
        mod = importlib.import_module(f"{__name__}.{name}")
        lo, hi = mod.VERSIONS
        valid = mod.REQUEST.VALID_VERSIONS
        if not (valid[0] <= lo <= hi <= valid[1]):
            raise RuntimeError(f"{name}: serves {lo}-{hi} outside the codec's {valid}")
        table[mod.API_KEY] = ApiHandler(
            mod.API_KEY, name, (lo, hi), frozenset(mod.LISTENERS), mod.REQUEST, mod.handle
        )
    return table


def lookup(api_key: int, listener_type: str) -> ApiHandler | None:
    handler = handlers().get(api_key)
    if handler is None or listener_type not in handler.listeners:
        return None
    return handler


def served(listener_type: str) -> list[tuple[int, int, int]]:
    """(api key, min, max) of every API served on a listener type, by key."""
    return sorted(
        (h.api_key, *h.versions) for h in handlers().values() if listener_type in h.listeners
    )


@dataclass(frozen=True)
class Features:
    """Feature ranges this node supports and the finalized levels (for ApiVersions v3+).
    `epoch` is the controller's FinalizedFeaturesEpoch (where the levels last changed),
    `image_epoch` a broker's (the last committed offset it has applied)."""

    supported: dict[str, tuple[int, int]]
    finalized: dict[str, int]
    epoch: int
    image_epoch: int = -1


async def through_controller(
    node: Node, request: Any, ctx: RequestContext, on_error: Callable[[int], Any]
) -> Any:
    """Submit to the controller; an unexpected failure answers UNKNOWN_SERVER_ERROR, logged."""
    try:
        return await node.submit(request, ctx.api_version, ctx)
    except Exception as exc:
        controller_failed(request, ctx, exc)
        return on_error(-1)


def controller_failed(request: Any, ctx: RequestContext, exc: BaseException | None = None
                      ) -> None:
    """Log that the controller failed on this request (the exception being handled)."""
    request_failed(f"{type(request).__name__} v{ctx.api_version} failed in the controller",
                   ctx, exc)


def request_failed(what: str, ctx: RequestContext, exc: BaseException | None = None) -> None:
    """One ERROR line naming the request, its sender and the exception; the traceback only
    at DEBUG, so that a request repeated by a client cannot flood the log with them."""
    if exc is None:
        exc = sys.exc_info()[1]
    _log.error("%s (correlation id %d, client %r, %s:%d on %s): %s: %s", what,
               ctx.correlation_id, ctx.client_id, ctx.client_host, ctx.client_port,
               ctx.listener, type(exc).__name__, exc)
    if _log.isEnabledFor(logging.DEBUG):
        _log.debug("traceback of the failure above", exc_info=exc)
