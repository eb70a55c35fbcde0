"""The request handlers, one module per API key, and the registry the server routes by.

Each handler module opens with the same header (versions served, listeners, behaviour, what is
skipped) and defines `API_KEY`, `VERSIONS`, `LISTENERS`, `REQUEST` and `async handle(node,
request, ctx)`. The ApiVersions answer is derived from this registry per listener type, so what
is advertised is exactly what is served.
"""

from __future__ import annotations

import importlib
import logging
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
    "allocate_producer_ids",
    "sasl_handshake",
    "sasl_authenticate",
    "describe_acls",
    "create_acls",
    "delete_acls",
    "update_features",
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
    """What a handler may use of the running node. A node may also offer `idempotent_ids()`
    (`RunningNode`), which quick answers use (`quick.py`); without it there are none."""

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
    except Exception:
        controller_failed(request, ctx)
        return on_error(-1)


def controller_failed(request: Any, ctx: RequestContext) -> None:
    """Log the exception being handled: the controller failed on this request."""
    _log.exception("%s v%d from %s failed in the controller",
                   type(request).__name__, ctx.api_version, ctx.client_host)
