"""`kraftpy metadata-state PATH`: the state a metadata log directory describes, after the
newest snapshot and the log after it are replayed by the controller itself
(`QuorumController.replay` and `describe()`), so this tool and the controller cannot disagree.
Text output is a tree like kafka-metadata-shell's `/image`; `--json` is describe() as is."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kraftpy.controller import replay
from kraftpy.tools.logdecode.dumptext import compact_json, problem_line
from kraftpy.tools.logdecode.model import Problem, RecordInfo
from kraftpy.tools.logdecode.paths import FileKind, LogFile, classify
from kraftpy.tools.logdecode.reader import read_log_file
from kraftpy.tools.logdecode.small_files import SmallFileError, read_properties

EXIT_OK, EXIT_DAMAGED, EXIT_USAGE = 0, 1, 2


class NoMetadataLog(ValueError):
    """The path holds no `__cluster_metadata-*` segments or snapshots."""


@dataclass
class Replayed:
    state: dict[str, Any]
    snapshot: str | None
    records: int = 0
    txn_records: int = 0
    problems: list[Problem] = field(default_factory=list)


def find_partition(path: Path, prefix: str = "__cluster_metadata-") -> Path | None:
    """The partition directory: PATH itself, or the one of that name under PATH."""
    if path.is_dir() and (path.name.startswith(prefix) or _has_log_files(path)):
        return path

    found = sorted(p for p in path.rglob(prefix + "*") if p.is_dir()) if path.is_dir() else []
    if len(found) > 1:
        raise NoMetadataLog(f"{path}: {len(found)} metadata logs here ({found[0]}, {found[1]}, "
                            "...); name one")
    return found[0] if found else None


def load(path: str | Path) -> Replayed:
    from kraftpy.controller.quorum_controller import QuorumController
    from kraftpy.controller.settings import ControllerSettings

    root = Path(path)
    if not root.exists():
        raise NoMetadataLog(f"{path}: no such directory")
    partition = find_partition(root)
    if partition is None and (root / "bootstrap.checkpoint").is_file():
        partition = root / "__cluster_metadata-0"  # formatted, never started: no log yet
    if partition is None:
        raise NoMetadataLog(f"{path}: no __cluster_metadata-* directory or log segments here")
    files = [classify(p) for p in sorted(partition.iterdir()) if p.is_file()] \
        if partition.is_dir() else []
    segments = [f for f in files if f.kind is FileKind.SEGMENT]
    snapshots = sorted((f for f in files if f.kind is FileKind.SNAPSHOT), key=lambda f: f.base_offset)
    props = _meta_properties(partition)
    settings = ControllerSettings(cluster_id=props.get("cluster.id", ""),
                                  node_id=int(props.get("node.id", "1") or 1))
    controller = QuorumController(settings)
    snapshot = snapshots[-1] if snapshots else None
    start = snapshot.base_offset if snapshot is not None else 0
    result = Replayed({}, str(snapshot.path) if snapshot else None)
    log_end = start
    target = _Reporting(controller, result.problems)
    if snapshot is not None:
        # As Kafka does (and `controller/replay.py`): a snapshot's records stand at its last
        # contained offset.
        target.file = snapshot
        result.records += replay.apply([target], _metadata(snapshot, result.problems,
                                                           at=start - 1))
    for segment in segments:
        target.file = segment
        records = [r for r in _metadata(segment, result.problems) if r[2] >= start]
        result.records += replay.apply([target], records)
        if records:
            log_end = max(log_end, records[-1][2] + 1)
    bootstrap = partition.parent / "bootstrap.checkpoint"
    if snapshot is None and result.records == target.failed and bootstrap.is_file():
        # A formatted directory that never ran: what `kafka-storage format` wrote is the state.
        result.snapshot = str(bootstrap)
        target.file = classify(bootstrap)
        result.records += replay.apply([target], _metadata(target.file, result.problems,
                                                           at=-1))
    result.records -= target.failed
    txn_end = 0
    for txn_dir in sorted(partition.parent.glob("__transaction_state-*")):
        for file in [classify(p) for p in sorted(txn_dir.glob("*.log"))]:
            for rec in _records(file, result.problems):
                if rec.kind != "txn" or rec.error:
                    continue
                key, value = rec.record
                try:
                    controller.replay_txn(key, value, rec.offset)
                    result.txn_records += 1
                except Exception as e:  # as above
                    result.problems.append(Problem(str(file.path), 0, "replay",
                                                   f"{type(e).__name__}: {e}", rec.offset))
                txn_end = max(txn_end, rec.offset + 1)
    controller.on_committed(log_end, txn_end)
    result.state = controller.describe()
    return result


def _records(file: LogFile, problems: list[Problem]) -> Iterator[RecordInfo]:
    for event in read_log_file(file, objects=True):
        if type(event) is RecordInfo:
            yield event
        elif type(event) is Problem:
            problems.append(event)


def _metadata(file: LogFile, problems: list[Problem], *, at: int | None = None
              ) -> Iterator[tuple[Any, int, int]]:
    """(record, version, offset) of a file's metadata records (`at`: every one there)."""
    for rec in _records(file, problems):
        if rec.kind == "metadata" and rec.record is not None:
            yield rec.record, rec.version, rec.offset if at is None else at


class _Reporting:
    """A replay target that reports a record the controller cannot replay, and goes on."""

    def __init__(self, controller: Any, problems: list[Problem]) -> None:
        self.controller = controller
        self.problems = problems
        self.file: LogFile | None = None
        self.failed = 0  # records that did not replay

    def replay(self, record: Any, version: int, offset: int) -> None:
        try:
            self.controller.replay(record, version, offset)
        except Exception as e:  # damaged input must give a report, not a traceback
            self.failed += 1
            self.problems.append(Problem(str(self.file.path if self.file else ""), 0,
                                         "replay", f"{type(e).__name__}: {e}", offset))


def _meta_properties(partition: Path) -> dict[str, Any]:
    path = partition.parent / "meta.properties"
    try:
        return read_properties(path.read_bytes())
    except (OSError, SmallFileError):
        return {}


def _has_log_files(path: Path) -> bool:
    return any(classify(p).kind in (FileKind.SEGMENT, FileKind.SNAPSHOT) for p in path.iterdir())


def render_tree(replayed: Replayed) -> list[str]:
    """kafka-metadata-shell-like paths, one fact per line."""
    s = replayed.state
    lines = []
    if replayed.snapshot:
        lines.append(f"/image/provenance: snapshot {Path(replayed.snapshot).name} "
                     f"+ {replayed.records} records replayed")
    else:
        lines.append(f"/image/provenance: {replayed.records} records replayed, no snapshot")
    for key in ("cluster_id", "metadata_version", "log_end_offset"):
        if key in s:
            lines.append(f"/image/{key}: {s[key]}")
    for name, level in sorted((s.get("features") or {}).items()):
        lines.append(f"/image/features/{name}: {level}")
    for b in s.get("brokers") or []:
        base = f"/image/cluster/brokers/{b['broker_id']}"
        endpoints = ",".join(f"{e['name']}://{e['host']}:{e['port']}" for e in b.get("endpoints") or [])
        lines.append(f"{base}: epoch={b.get('broker_epoch')} fenced={_t(b.get('fenced'))} "
                     f"inControlledShutdown={_t(b.get('in_controlled_shutdown'))} "
                     f"incarnationId={b.get('incarnation_id')} rack={b.get('rack')} "
                     f"endpoints=[{endpoints}]")
    pids = s.get("producer_ids") or {}
    if "next_producer_id" in pids:
        lines.append(f"/image/producerIds/nextProducerId: {pids['next_producer_id']}")
    for t in s.get("topics") or []:
        base = f"/image/topics/byName/{t['name']}"
        lines.append(f"{base}/id: {t.get('topic_id')}")
        for p in t.get("partitions") or []:
            lines.append(f"{base}/{p['partition']}: leader={p.get('leader')} "
                         f"leaderEpoch={p.get('leader_epoch')} isr={p.get('isr')} "
                         f"replicas={p.get('replicas')}")
    for x in s.get("transactions") or []:
        lines.append(f"/image/transactions/{x['transactional_id']}: producerId={x.get('producer_id')} "
                     f"producerEpoch={x.get('producer_epoch')} state={x.get('state')}")
    return lines


def main(path: str, *, as_json: bool = False, out: IO[str] | None = None,
         err: IO[str] | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        replayed = load(path)
    except NoMetadataLog as e:
        err.write(f"kraftpy metadata-state: {e}\n")
        return EXIT_USAGE
    if as_json:
        out.write(compact_json(replayed.state) + "\n")
    else:
        out.write("\n".join(render_tree(replayed)) + "\n")
    for problem in replayed.problems:
        err.write(problem_line(problem) + "\n")
    return EXIT_DAMAGED if replayed.problems else EXIT_OK


def _t(value: object) -> str:
    return "true" if value is True else "false" if value is False else str(value)
