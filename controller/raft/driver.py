"""The raft driver: the core's actions carried out against a log, a network and a disk.

`RaftDriver` is the one interpreter of the core's actions (`carry_out`). The server's trio
runner (`runner.py`), the deterministic simulation and the tests all drive a node through it,
so what they check is what the server does. It touches the world only through its ports:

- `log`: the replicated log (`PartitionLog` on disk, or the simulation's): appends as
  leader, fetched batches as follower, truncations, a reset to an installed snapshot, reads
  for a Fetch answer;
- `snapshots`: snapshot files (a chunk read for a FetchSnapshot answer, a download written
  and installed);
- `send`, `respond`: the network; `flush`: ask for an fsync up to an offset (answered later
  with `flushed`, in order); `write_quorum_state`: durable before the next action; `wake`:
  the core has new work (an append lingers) and wants a `poll` at `core.next_deadline()`.

It tells a `RaftListener` what happened: the high watermark moved, this node started or
stopped leading, a downloaded snapshot replaced the log. It knows nothing of what the
records mean; the controller host above it does.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kraftpy.controller.raft import actions as a
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.messages import fill_snapshot_chunk
from kraftpy.controller.raft.roles import Leader
from kraftpy.protocol.record_batch import iter_record_batches

log = logging.getLogger("kraftpy.raft")


class RaftDriverError(RuntimeError):
    """The log and the core disagree, or a write the core asked for failed: the node cannot
    go on (its memory would be ahead of, or apart from, its disk)."""


class RaftListener(Protocol):
    def committed(self, high_watermark: int) -> None:
        """Records below `high_watermark` are committed (it never goes back)."""

    def leadership_changed(self, leading: bool) -> None:
        """This node became the leader (its log's end not yet committed), or stopped being it."""

    def snapshot_installed(self, snapshot: Any, size: int) -> None:
        """A snapshot from the leader replaced the log, which now starts at its end."""


class ReplicatedLog(Protocol):
    """What the driver needs of the log (`PartitionLog` has it)."""

    log_start_offset: int
    log_end_offset: int

    def append(self, values: Any, *, leader_epoch: int, timestamp: int, keys: Any = None,
               control: bool = False) -> int: ...
    def append_batch(self, raw: bytes) -> int: ...
    def truncate_to(self, offset: int) -> None: ...
    def reset_to(self, offset: int) -> None: ...
    def read_raw(self, start_offset: int, limit_offset: int, max_bytes: int) -> bytes | None: ...


class SnapshotFiles(Protocol):
    """Snapshot files as the driver needs them (`snapshot_files.SnapshotFiles`)."""

    def read_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                   ) -> tuple[int, bytes] | None: ...
    def write_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None: ...
    def install(self, snapshot_id: tuple[int, int]) -> tuple[Any, int]: ...


@dataclass
class RaftPorts:
    log: ReplicatedLog
    snapshots: SnapshotFiles
    send: Callable[[int, int, Any], None]
    respond: Callable[[Any, Any], None]
    flush: Callable[[int], None]
    write_quorum_state: Callable[[bytes], None]
    wake: Callable[[], None] = lambda: None


class RaftDriver:
    """One replica: the core and the actions it asks for, carried out in order."""

    def __init__(self, core: RaftNode, ports: RaftPorts, listener: RaftListener,
                 clock_ms: Callable[[], float]) -> None:
        self.core = core
        self.ports = ports
        self.listener = listener
        self.clock_ms = clock_ms
        self.high_watermark = core.high_watermark  # the last one told to the listener
        self.leading = False

    # --- events: each runs the core, then carries out what it asks ---------------------------
    def start(self) -> None:
        """Carry out what the core decided as it was built (quorum-state, a lone voter's
        election)."""
        self.carry_out(self.core._take())

    def poll(self) -> None:
        self.carry_out(self.core.poll(self.clock_ms()))

    def handle_request(self, token: Any, request: Any, version: int) -> None:
        self.carry_out(self.core.handle_request(token, request, version, self.clock_ms()))

    def handle_response(self, source: int, correlation_id: int, response: Any) -> None:
        self.carry_out(self.core.handle_response(source, correlation_id, response,
                                                 self.clock_ms()))

    def request_failed(self, destination: int, correlation_id: int) -> None:
        self.carry_out(self.core.request_failed(destination, correlation_id, self.clock_ms()))

    def flushed(self, offset: int) -> None:
        """The oldest `flush` asked for is done: the log is on disk up to `offset`."""
        self.carry_out(self.core.on_flushed(offset, self.clock_ms()))

    def snapshot_taken(self, snapshot_id: tuple[int, int],
                       trimmed_to: tuple[int, int] | None) -> None:
        """A snapshot of committed state is on disk; with `trimmed_to` (a snapshot's id), the
        log below that snapshot and the snapshots older than it are gone."""
        core, now = self.core, self.clock_ms()
        if snapshot_id[0] > core.log.start_offset:
            self.carry_out(core.on_snapshot(snapshot_id, delete_before=False, now_ms=now))
        if trimmed_to is not None and trimmed_to[0] > core.log.start_offset:
            self.carry_out(core.on_snapshot(trimmed_to, delete_before=True, now_ms=now))

    def resign(self) -> None:
        self.carry_out(self.core.resign(self.clock_ms()))

    def append(self, values: list[bytes], now_ms: float | None = None) -> int:
        """Records as leader, in one batch; they go out after the linger (`wake` asks for a
        poll). The offset of the first."""
        base = self.core.append(values, self.clock_ms() if now_ms is None else now_ms)
        self.ports.wake()
        return base

    def change_voters(self, step: Callable[[RaftNode, float], tuple[int, list[Any]]]) -> int:
        """A KIP-853 voter change decided by the core (`add_voter`, ...): its error code."""
        error, actions = step(self.core, self.clock_ms())
        self.carry_out(actions)
        return error

    # --- the interpreter ---------------------------------------------------------------------
    def carry_out(self, actions: list[a.Action]) -> None:
        """Do what the core asks, in order, then tell the listener of a leadership change."""
        ports = self.ports
        for action in actions:
            kind = type(action)
            if kind is a.Send:
                ports.send(action.destination, action.correlation_id, action.request)
            elif kind is a.Respond:
                self._respond(action)
            elif kind is a.AppendBatch:
                keys = [k for k, _ in action.records]
                base = ports.log.append([v for _, v in action.records],
                                        keys=keys if any(keys) else None,
                                        control=action.control, leader_epoch=action.epoch,
                                        timestamp=action.timestamp)
                if base != action.base_offset:
                    raise RaftDriverError(f"batch appended at {base}, the core expected "
                                          f"{action.base_offset}")
            elif kind is a.AppendFetched:
                self._append_fetched(action)
            elif kind is a.Flush:
                ports.flush(action.offset)
            elif kind is a.Committed:
                self.high_watermark = action.high_watermark
                self.listener.committed(action.high_watermark)
            elif kind is a.Truncate:
                if action.offset < self.high_watermark:
                    raise RaftDriverError(f"truncation to {action.offset} below the high "
                                          f"watermark {self.high_watermark}")
                log.info("truncating the metadata log to offset %d (a diverging suffix)",
                         action.offset)
                ports.log.truncate_to(action.offset)
            elif kind is a.WriteQuorumState:
                ports.write_quorum_state(action.data)
            elif kind is a.LeaderChanged:
                log.info("leader of epoch %d: %s", action.epoch,
                         "none known" if action.leader_id is None else action.leader_id)
            elif kind is a.Note:
                getattr(log, action.level, log.info)("%s", action.text)
            elif kind is a.WriteSnapshotChunk:
                if action.position == 0:
                    log.info("downloading snapshot %020d-%010d from the leader",
                             *action.snapshot_id)
                ports.snapshots.write_chunk(action.snapshot_id, action.position, action.data)
            elif kind is a.InstallSnapshot:
                self._install(action.snapshot_id)
        leading = isinstance(self.core.state, Leader)
        if leading != self.leading:
            self.leading = leading
            self.listener.leadership_changed(leading)

    def _respond(self, action: a.Respond) -> None:
        response = action.response
        if action.read_from is not None:
            log_ = self.ports.log
            data = log_.read_raw(action.read_from, log_.log_end_offset, action.max_bytes)
            response.responses[0].partitions[0].records = data or b""
        elif action.snapshot is not None:
            snapshot_id, position, max_bytes = action.snapshot
            fill_snapshot_chunk(response, self.ports.snapshots.read_chunk(
                snapshot_id, position, max_bytes))
        self.ports.respond(action.token, response)

    def _append_fetched(self, action: a.AppendFetched) -> None:
        data, log_ = action.records, self.ports.log
        for batch in iter_record_batches(data):
            log_.append_batch(bytes(data[batch.start:batch.end]))
        if log_.log_end_offset != action.end_offset:
            raise RaftDriverError(f"fetched batches end at {log_.log_end_offset}, the core "
                                  f"expected {action.end_offset}")

    def _install(self, snapshot_id: tuple[int, int]) -> None:
        """The download is whole: it becomes the newest snapshot and the log starts (empty)
        at its end (Kafka's truncateToLatestSnapshot)."""
        snapshot, size = self.ports.snapshots.install(snapshot_id)
        self.ports.log.reset_to(snapshot_id[0])
        self.high_watermark = max(self.high_watermark, snapshot_id[0])
        log.info("installed snapshot %020d-%010d (%d bytes) from the leader; the log now "
                 "starts at offset %d", *snapshot_id, size, snapshot_id[0])
        self.listener.snapshot_installed(snapshot, size)
