"""A snapshot file is written one batch behind its encoding, from a second thread: the file
holds every batch in order, and a failure on either side is raised by the writer's caller,
with no thread left behind, no hang, and no `.part` file left."""

from __future__ import annotations

import errno
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.controller.log import snapshots
from kraftpy.controller.log.snapshots import SnapshotId, write_checkpoint_file, write_snapshot


class FailingFile(io.BytesIO):
    """Fails its `fail_at`-th write with ENOSPC, as a full disk does."""

    def __init__(self, fail_at: int) -> None:
        super().__init__()
        self.writes = 0
        self.fail_at = fail_at

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        if self.writes == self.fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().write(data)


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "snapshot-writer"]


def test_every_batch_is_written_in_order() -> None:
    batches = [bytes([i]) * (1000 + i) for i in range(50)]
    out = io.BytesIO()
    snapshots._write_behind(out, iter(batches))
    assert out.getvalue() == b"".join(batches)
    assert not _writers()


def test_a_failed_write_is_raised_and_stops_the_encoding() -> None:
    encoded = []

    def batches() -> Iterator[bytes]:
        for i in range(1000):
            encoded.append(i)
            yield b"x" * 100

    out = FailingFile(fail_at=3)
    with pytest.raises(OSError) as info:
        snapshots._write_behind(out, batches())
    assert info.value.errno == errno.ENOSPC
    assert len(encoded) < 1000  # the encoding stopped soon after the write failed
    assert out.getvalue() == b"x" * 200
    assert not _writers()


def test_a_failed_encoding_is_raised_after_the_writer_stops() -> None:
    def batches() -> Iterator[bytes]:
        yield b"a" * 10
        yield b"b" * 10
        raise ValueError("a record that cannot be encoded")

    out = io.BytesIO()
    with pytest.raises(ValueError, match="cannot be encoded"):
        snapshots._write_behind(out, batches())
    assert out.getvalue() == b"a" * 10 + b"b" * 10
    assert not _writers()


def test_a_snapshot_that_fails_to_write_leaves_no_part_file(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    real_open = open

    def full_disk_open(path: object, mode: str = "r", *args: object, **kwargs: object) -> object:
        f = real_open(path, mode, *args, **kwargs)  # type: ignore[call-overload]
        if "w" in mode:
            def write(data: bytes) -> int:
                raise OSError(errno.ENOSPC, "No space left on device")
            f.write = write  # type: ignore[method-assign]
        return f

    monkeypatch.setattr(snapshots, "open", full_disk_open, raising=False)
    with pytest.raises(OSError) as info:
        write_snapshot(tmp_path, SnapshotId(10, 1), [b"v" * 100] * 1000,
                       last_contained_log_timestamp=0, timestamp=0)
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []
    monkeypatch.undo()
    path = tmp_path / "bootstrap.checkpoint"
    write_checkpoint_file(path, [b"one", b"two"])
    assert path.read_bytes() == b"onetwo"
    assert not _writers()
