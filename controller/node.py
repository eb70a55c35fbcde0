"""One running kraftpy node: storage recovered, the quorum task, the server, and SIGTERM.

Startup order: bind the listeners (so a port clash fails before the data dir is touched),
start the metrics listener if one is configured (its /ready says 503 meanwhile), open and
recover the data dir, start the quorum task, start accepting (/ready: 200). SIGTERM or
SIGINT: stop accepting, let in-flight requests finish and their records be fsynced, close
the logs, exit 0.
"""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Awaitable
from typing import Any

import outcome
import trio
from kraftpy.controller import api
from kraftpy.controller.api.quick import QuickTable
from kraftpy.controller.config import ServerConfig
from kraftpy.controller.quorum import Quorum
from kraftpy.controller.server import Server

log = logging.getLogger("kraftpy.node")

SWITCH_INTERVAL_S = 0.001
QUICK_ANSWERS = "kraftpy.quick.answers"
# How long a stopping lone voter waits for its last appends to commit (a linger and an fsync).
FINISH_WRITES_S = 5.0


class NodeStartError(RuntimeError):
    """The node cannot start (port in use, data dir locked or damaged); says which and why.
    `exit_code` 2: the data dir needs a feature level this node cannot run, or its log has
    lost records (`recovery.RecoveryError.exit_code`)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def quick_answers(config: ServerConfig) -> bool:
    """`kraftpy.quick.answers` (true by default)."""
    from kraftpy.controller.config import ConfigError
    from kraftpy.controller.properties import default

    value = str(config.extra.get(QUICK_ANSWERS, default(QUICK_ANSWERS))).strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{QUICK_ANSWERS}: {value!r} is not true or false")
    return value == "true"


class RunningNode:
    """What request handlers see of the node (`api.Node`)."""

    def __init__(self, config: ServerConfig, cluster_id: str, quorum: Quorum,
                 supported_features: dict[str, tuple[int, int]]) -> None:
        self.config = config
        self.cluster_id = cluster_id
        # The node's quorum: it also answers Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
        # FetchSnapshot, DescribeQuorum and the voter changes.
        self.quorum = quorum
        self.supported_features = supported_features
        # The requests this node answers by their bytes (`api/quick.py`), by listener type.
        self.quick_table = QuickTable() if quick_answers(config) else None

    def clock_ms(self) -> int:
        return self.quorum.clock_ms()

    def submit(self, request: Any, api_version: int, ctx: api.RequestContext) -> Awaitable[Any]:
        # Hands back the quorum's own awaitable: one coroutine less per request.
        return self.quorum.submit(request, api_version, ctx.listener)

    def take_idempotent_ids(self, count: int) -> tuple[int, int] | None:
        """Ids for a run of `count` idempotent InitProducerIds read by their bytes (the quick
        answers, `api/quick.py`): what `submit` would give them one after another
        (`QuorumController.take_idempotent_ids`), or None while the quorum is not running or
        the controller must decide more (then `submit` them). Such an answer writes nothing,
        so it needs no append and no commit."""
        quorum = self.quorum
        if not quorum.running:  # as submit checks first
            return None
        return quorum.controller.take_idempotent_ids(count, quorum.clock_ms())

    def describe(self) -> dict[str, Any]:
        return self.quorum.controller.describe()

    def features(self) -> api.Features:
        image = self.describe()
        finalized = dict(image.get("features") or {})
        if image.get("metadata_version"):
            finalized.setdefault("metadata.version", image["metadata_version"])
        return api.Features(
            supported=self.supported_features,
            finalized=finalized,
            epoch=self.quorum.controller.features.epoch,
            image_epoch=int(image.get("high_watermark", 0)) - 1,
        )


async def serve_node(
    config: ServerConfig, *, task_status: trio.TaskStatus[RunningNode] = trio.TASK_STATUS_IGNORED
) -> int:
    # Worker threads (fsync rounds, snapshot files) hand the GIL back to the event loop
    # within this, not CPython's 5 ms, so a request that arrives meanwhile waits less
    # (measured at 64 connections: p99/p50 about 2.7x instead of 3.9x, same CPU).
    previous = sys.getswitchinterval()
    sys.setswitchinterval(min(previous, SWITCH_INTERVAL_S))
    try:
        return await _serve_node(config, task_status=task_status)
    finally:
        sys.setswitchinterval(previous)


async def _serve_node(config: ServerConfig, *, task_status: trio.TaskStatus[RunningNode]
                      ) -> int:
    from kraftpy.controller.security.layer import SecurityConfigError, SecurityLayer

    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        server = Server(config)
        from kraftpy.controller.config import ConfigError
        try:
            quick_answers(config)
        except ConfigError as exc:
            raise NodeStartError(str(exc), 2) from None
        try:
            security = SecurityLayer.from_config(config)
        except SecurityConfigError as exc:
            raise NodeStartError(f"bad security configuration: {exc}") from None
        try:
            bound = await server.bind()
        except OSError as exc:
            raise NodeStartError(str(exc)) from None
        config = config.with_bound_ports(bound)
        server.config = config
        metrics = await _bind_metrics(config)
        if metrics is None:
            return await _recover_and_serve(config, server, security, None, signals,
                                            task_status)
        # The metrics listener serves from before recovery until the node has stopped.
        async with trio.open_nursery() as nursery:
            await nursery.start(metrics.serve)
            ran = await outcome.acapture(_recover_and_serve, config, server, security,
                                         metrics.collector, signals, task_status)
            nursery.cancel_scope.cancel()
        return ran.unwrap()


async def _bind_metrics(config: ServerConfig) -> Any:
    """The metrics listener `kraftpy.metrics.listener` asks for, bound; None when off."""
    from kraftpy.controller.config import ConfigError
    from kraftpy.controller.metrics_http import metrics_address

    try:
        address = metrics_address(config)
    except ConfigError as exc:
        raise NodeStartError(str(exc)) from None
    if address is None:
        return None
    from kraftpy.controller.metrics import NodeCollector
    from kraftpy.controller.metrics_http import MetricsServer

    metrics = MetricsServer(address, NodeCollector(config.node_id, config.metadata_log_dir))
    try:
        await metrics.bind()
    except OSError as exc:
        raise NodeStartError(str(exc)) from None
    return metrics


async def _recover_and_serve(config: ServerConfig, server: Server, security: Any,
                             collector: Any, signals: Any,
                             task_status: trio.TaskStatus[RunningNode]) -> int:
    from kraftpy.controller import quorum, recovery
    from kraftpy.controller.raft import dynamic
    from kraftpy.controller.raft.config import RaftConfigError

    try:
        voters = quorum.configured_voters(config)
        bootstrap = dynamic.configured_bootstrap(config) if voters is None else None
    except quorum.QuorumError as exc:
        raise NodeStartError(str(exc), exc.exit_code) from None
    except RaftConfigError as exc:
        raise NodeStartError(str(exc), 2) from None
    if voters is None and bootstrap is None:
        voters = quorum.lone_voter(config)
    try:
        opened_quorum = await trio.to_thread.run_sync(quorum.open_quorum, config,
                                                      voters or {}, bootstrap)
    except recovery.RecoveryError as exc:
        raise NodeStartError(str(exc), exc.exit_code) from None
    except quorum.QuorumError as exc:
        raise NodeStartError(str(exc), exc.exit_code) from None
    node = RunningNode(config, opened_quorum.cluster_id, opened_quorum,
                       opened_quorum.supported_features)
    return await _serve(config, server, security, collector, signals, task_status, node,
                        opened_quorum.storage, opened_quorum.raft.epoch)


async def _serve(config: ServerConfig, server: Server, security: Any, collector: Any,
                 signals: Any, task_status: trio.TaskStatus[RunningNode], node: RunningNode,
                 storage: Any, leader_epoch: int) -> int:
    """Run the quorum and the server until a signal; then drain, stop, close the logs."""
    quorum = node.quorum
    server.node = node
    security.install(server, node)
    security.attach_acls(quorum.controller)
    quorum.on_new_controller = security.attach_acls
    clean = False
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            await nursery.start(server.serve)
            if collector is not None:
                collector.attach(node)  # /ready: 200 from now on
            log.info("kraftpy node %d serving cluster %s from %s (leader epoch %d)",
                     config.node_id, node.cluster_id, config.metadata_log_dir, leader_epoch)
            task_status.started(node)
            async for signum in signals:
                log.info("received %s: stopping (finishing requests in flight)",
                         signal.Signals(signum).name)
                break
            if not quorum.lone_voter:
                # One of several voters resigns first: a commit may need voters that are
                # stopping too, so nothing may wait for one during the drain. A lone voter
                # commits alone: what is in flight is answered, then it stops.
                quorum.stop()
            await server.drain()
            if quorum.lone_voter:
                await quorum.finish_writes(FINISH_WRITES_S)
            quorum.stop()
        clean = True
    finally:
        if clean:
            await trio.to_thread.run_sync(storage.close)
        elif storage.lock is not None:
            # No clean-shutdown marker after a failure: the next start validates the log.
            storage.lock.release()
    log.info("stopped cleanly")
    return 0
