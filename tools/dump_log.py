"""`kraftpy dump-log`: what is in a metadata log directory or a Kafka `log.dirs` directory, in
Kafka's dump layout, as JSON lines, or as a summary.

The text layout is Kafka 4.1's `kafka-dump-log.sh`, with the decoder Kafka's tool would need
for each partition: `--cluster-metadata-decoder` for `__cluster_metadata` (and snapshots),
`--transaction-log-decoder` for `__transaction_state`, `--offsets-decoder` for
`__consumer_offsets`, and the default decoder for any other topic (batch lines; record lines
with `deep_iteration`, and their keys and values as text with `print_data`), so the two tools'
output can be diffed. JSON rows cover every record of every partition (`logdecode.records`):
typed metadata and coordinator records, and ordinary topics' records with their keys, values
and headers, each with the batch fields exactly-once depends on. Damage is reported on stderr
with file and position, and decoding goes on.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kraftpy.protocol.record_batch import BATCH_HEADER
from kraftpy.tools.logdecode.dumptext import (
    batch_line,
    compact_json,
    file_header,
    problem_line,
    record_line,
    trailing_bytes_line,
)
from kraftpy.tools.logdecode.model import BatchInfo, Problem, RecordInfo
from kraftpy.tools.logdecode.paths import FileKind, LogFile, LogKind, cluster_of, expand
from kraftpy.tools.logdecode.payload import DATA_TYPE
from kraftpy.tools.logdecode.progress import Progress
from kraftpy.tools.logdecode.reader import read_file, read_log_file
from kraftpy.tools.logdecode.records import (
    NO_BATCH,
    batch_part,
    location,
    marker_epoch,
    record_rows,
)
from kraftpy.tools.logdecode.records import row_json as full_row_json
from kraftpy.tools.logdecode.rows import json_head
from kraftpy.tools.logdecode.scan import json_text, scan
from kraftpy.tools.logdecode.small_files import SmallFileError, read_small_file, render_small_file

NO_OP = "NO_OP_RECORD"

EXIT_OK, EXIT_DAMAGED, EXIT_USAGE = 0, 1, 2


class NotALogError(ValueError):
    """A path that names nothing this tool reads."""


@dataclass
class Tally:
    files: int = 0
    batches: int = 0
    records: int = 0
    problems: list[Problem] = field(default_factory=list)
    by_type: Counter[str] = field(default_factory=Counter)
    by_epoch: Counter[int] = field(default_factory=Counter)
    by_type_epoch: Counter[tuple[str, int]] = field(default_factory=Counter)


def resolve(paths: Sequence[str], *, all_files: bool) -> list[LogFile]:
    """The files to read, in order; a clear error for a path that is not one of ours."""
    files: list[LogFile] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise NotALogError(f"{raw}: no such file or directory")
        found = list(expand([path], all_files=all_files))
        if path.is_dir() and not found:
            raise NotALogError(f"{raw}: no Kafka log segments or snapshots under this directory")
        if not path.is_dir() and found[0].kind is FileKind.UNKNOWN:
            raise NotALogError(
                f"{raw}: not a Kafka log file (expected <offset>.log, <offset>-<epoch>.checkpoint, "
                "bootstrap.checkpoint, quorum-state, meta.properties, leader-epoch-checkpoint, "
                "partition.metadata, .index, .timeindex, a producer-state .snapshot or a "
                ".txnindex)")
        files.extend(found)
    return files


def dump(files: Iterable[LogFile], out: IO[str], err: IO[str], *, mode: str = "text",
         skip_noop: bool = False, progress: Progress | None = None, print_data: bool = False,
         deep_iteration: bool = False) -> Tally:
    tally = Tally()
    for file in files:
        tally.files += 1
        if file.kind.has_batches:
            if mode == "json":
                _json_file(file, out, skip_noop, tally, text=print_data)
            else:
                _text_file(file, out, skip_noop, tally, write=(mode == "text"),
                           print_data=print_data, deep_iteration=deep_iteration)
        elif mode.startswith("summary"):
            continue
        else:
            _small_file(file, out, mode, tally)
        if progress is not None:
            progress.advance(file.path)
    if mode == "summary":
        _summary(tally, out)
    elif mode == "summary-json":
        out.write(compact_json(summary_dict(tally)) + "\n")
    for problem in tally.problems:
        err.write(problem_line(problem) + "\n")
    return tally


def _text_file(file: LogFile, out: IO[str], skip_noop: bool, tally: Tally, *, write: bool,
               print_data: bool = False, deep_iteration: bool = False) -> None:
    lines: list[str] = file_header(file, str(file.path)) if write else []
    batch: BatchInfo | None = None
    pending: list[str] = []  # the current batch's line and its records' lines
    hidden = 0  # NoOpRecords of the current batch left out by --skip-noop
    payloads, records = write, "all"
    data = file.log is LogKind.DATA
    if data:  # Kafka's default decoder: records and data on request; a summary counts headers
        payloads = write and print_data
        records = ("all" if print_data or deep_iteration else "none") if write else "control"
    for event in read_log_file(file, payloads=payloads, with_data=False, records=records):
        if type(event) is RecordInfo:
            assert batch is not None
            name = event.type_name or event.kind
            tally.records += 1
            tally.by_type[name] += 1
            tally.by_epoch[batch.partition_leader_epoch] += 1
            tally.by_type_epoch[(name, batch.partition_leader_epoch)] += 1
            if not write:
                continue
            if skip_noop and event.type_name == NO_OP:
                hidden += 1
            else:
                pending.append(record_line(batch, event))
        elif type(event) is BatchInfo:
            _flush_batch(lines, pending, hidden)
            batch, hidden = event, 0
            pending = [batch_line(event, event.position)] if write else []
            tally.batches += 1
            if data and not write and not event.is_control:
                _count_data(tally, event)
        else:
            tally.problems.append(event)
            if write and event.kind in ("torn-tail", "trailing-bytes"):
                _flush_batch(lines, pending, hidden)
                pending, hidden = [], 0
                count = int(event.message.split(" ", 1)[0])
                lines.append(trailing_bytes_line(count, file.path.name))
        if len(lines) > 2000:
            out.write("\n".join(lines) + "\n")
            lines.clear()
    _flush_batch(lines, pending, hidden)
    if lines:
        out.write("\n".join(lines) + "\n")


def _count_data(tally: Tally, batch: BatchInfo) -> None:
    """A summary of an ordinary topic counts its records from the batch header, unread."""
    count, epoch = batch.record_count, batch.partition_leader_epoch
    tally.records += count
    tally.by_type[DATA_TYPE] += count
    tally.by_epoch[epoch] += count
    tally.by_type_epoch[(DATA_TYPE, epoch)] += count


def _flush_batch(lines: list[str], pending: list[str], hidden: int) -> None:
    # With --skip-noop a batch of nothing but NoOpRecords disappears with its records.
    if pending and not (hidden and len(pending) == 1):
        lines.extend(pending)


def _json_file(file: LogFile, out: IO[str], skip_noop: bool, tally: Tally, *,
               text: bool = False) -> None:
    """One JSON line per record (`records.FULL_NAMES`). Ordinary topics' records take the
    general way (`records.record_rows`); metadata and coordinator logs the scan's fast one,
    where a line is this file's head, the batch's fields (once per batch), the record's
    numbers and the record's shared tail (see logdecode.scan)."""
    path = str(file.path)
    lines: list[str] = []
    append = lines.append
    records = batches = 0
    last_batch = None

    def flush() -> None:
        if lines:
            out.write("\n".join(lines))
            out.write("\n")
            lines.clear()

    if file.log is LogKind.DATA:
        for row in record_rows(file, text=text):
            error = row[24]
            if row[21] is None:  # damage that is not one record's: a report row
                problem_kind, _, message = error.partition(": ")
                tally.problems.append(Problem(path, row[3], problem_kind, message, row[5]))
            else:
                records += 1
                if row[3] != last_batch:
                    last_batch = row[3]
                    batches += 1
            append(full_row_json(row))
            if len(lines) >= 4096:
                flush()
        flush()
        tally.records += records
        tally.batches += batches
        return
    try:
        data = read_file(file.path)
    except OSError as e:
        tally.problems.append(Problem(path, 0, "io", f"cannot read: {e.strerror or e}"))
        return
    cluster, kind = cluster_of(path, ""), file.kind.value
    topic, partition = location(file)
    head = json_head(cluster, path, kind)
    where = (f'"topic":{"null" if topic is None else json_text(topic)},'
             f'"partition":{"null" if partition is None else partition},')
    unpack = BATCH_HEADER.unpack_from
    start: str | None = None  # the current batch's line start, up to the offset
    middle = ""  # the current batch's fields after the timestamp, up to the sequence
    base_seq = -1
    last_start = -1
    for position, base, offset, epoch, timestamp, cols, tail in scan(file, data):
        error = cols[4]
        if error is None:
            records += 1
            if position != last_batch:
                last_batch = position
                batches += 1
            if skip_noop and cols[1] == NO_OP:
                continue
        elif cols[1] is None:  # damage that is not one record's: a report row
            problem_kind, _, message = error.partition(": ")
            tally.problems.append(Problem(path, position, problem_kind, message, offset))
        else:
            records += 1
            tally.problems.append(Problem(path, position, "undecodable-record", error, offset))
        if tail is None or base < 0:
            part = batch_part(unpack(data, position)) if base >= 0 else NO_BATCH
            sequence = None if offset is None or part[3] is None else \
                (-1 if part[3] < 0 else (part[3] + offset - base) % 0x80000000)
            append(full_row_json((cluster, path, kind, position, base, offset, epoch, timestamp,
                                  topic, partition, *part, sequence,
                                  marker_epoch(cols[0], cols[1], cols[3]), *cols, None, None,
                                  None)))
            continue
        if position != last_start:  # a batch's first line (most batches have one record)
            last_start, start = position, None
            h = unpack(data, position)
            base_seq = h[11]
            part = batch_part(h)
            middle = (f'{where}"batch_last_offset":{part[0]},"producer_id":{part[1]},'
                      f'"producer_epoch":{part[2]},"base_sequence":{base_seq},'
                      f'"last_sequence":{part[4]},'
                      f'"is_transactional":{"true" if part[5] else "false"},'
                      f'"timestamp_type":"{part[6]}","compression":"{part[7]}","sequence":')
            first = f'{head}{position},"batch_base_offset":{base},"offset":{offset},'
        else:
            if start is None:  # the batch's later records share the line start
                start = f'{head}{position},"batch_base_offset":{base},"offset":'
            first = f"{start}{offset},"
        sequence = -1 if base_seq < 0 else (base_seq + offset - base) % 0x80000000
        coordinator = "null" if not cols[0] else _null(marker_epoch(cols[0], cols[1], cols[3]))
        append(f'{first}"leader_epoch":{epoch},"timestamp_ms":{timestamp},{middle}{sequence},'
               f'"coordinator_epoch":{coordinator},{tail}')
        if len(lines) >= 4096:
            flush()
    flush()
    tally.records += records
    tally.batches += batches


def _null(value: int | None) -> str:
    return "null" if value is None else str(value)


def _small_file(file: LogFile, out: IO[str], mode: str, tally: Tally) -> None:
    try:
        decoded = read_small_file(file)
    except (SmallFileError, OSError) as e:
        tally.problems.append(Problem(str(file.path), 0, "bad-file", str(e)))
        return
    if mode == "json":
        out.write(compact_json({"file": str(file.path), "file_kind": file.kind.value,
                                "content": decoded}) + "\n")
    elif mode == "text":
        out.write("\n".join([f"Dumping {file.path}", *render_small_file(file, decoded)]) + "\n")


def _summary(tally: Tally, out: IO[str]) -> None:
    lines = [f"files: {tally.files} batches: {tally.batches} records: {tally.records} "
             f"problems: {len(tally.problems)}", "records by type:"]
    width = max((len(t) for t in tally.by_type), default=0)
    lines += [f"  {t:<{width}}  {n}" for t, n in sorted(tally.by_type.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines.append("records by leader epoch:")
    lines += [f"  {e:>6}  {n}" for e, n in sorted(tally.by_epoch.items())]
    lines.append("records by leader epoch and type:")
    lines += [f"  {e:>6}  {t:<{width}}  {n}"
              for (t, e), n in sorted(tally.by_type_epoch.items(), key=lambda kv: (kv[0][1], -kv[1]))]
    out.write("\n".join(lines) + "\n")


def summary_dict(tally: Tally) -> dict[str, Any]:
    return {
        "files": tally.files, "batches": tally.batches, "records": tally.records,
        "problems": len(tally.problems), "by_type": dict(tally.by_type),
        "by_epoch": {str(k): v for k, v in sorted(tally.by_epoch.items())},
        "by_epoch_and_type": {str(e): {t: n for (t, e2), n in tally.by_type_epoch.items() if e2 == e}
                              for e in sorted(tally.by_epoch)},
    }


def main(paths: Sequence[str], *, mode: str = "text", skip_noop: bool = False,
         all_files: bool = False, progress: bool | None = None, print_data: bool = False,
         deep_iteration: bool = False,
         out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        files = resolve(paths, all_files=all_files)
    except NotALogError as e:
        err.write(f"kraftpy dump-log: {e}\n")
        return EXIT_USAGE
    bar = Progress.maybe(files, enabled=progress, stream=err)
    try:
        tally = dump(files, out, err, mode=mode, skip_noop=skip_noop, progress=bar,
                     print_data=print_data, deep_iteration=deep_iteration)
    except BrokenPipeError:  # `| head`: the reader has seen enough
        _silence_stdout()
        return EXIT_OK
    finally:
        if bar is not None:
            bar.close()
    return EXIT_DAMAGED if tally.problems else EXIT_OK


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
