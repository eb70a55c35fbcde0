"""FsyncRing: io_uring fsyncs, and the places it must give way to a worker thread."""

from __future__ import annotations

import errno
import os
import platform
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.controller.log import fsync_ring
from kraftpy.controller.log.fsync_ring import FsyncRing


def _io_uring_refused() -> str | None:
    """Why this machine cannot have a ring, or None when it should."""
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return f"{sys.platform}/{platform.machine()}"
    try:
        disabled = Path("/proc/sys/kernel/io_uring_disabled").read_text().strip()
    except OSError:
        disabled = "0"
    return None if disabled == "0" else f"kernel.io_uring_disabled={disabled}"


@pytest.fixture
def ring() -> Iterator[FsyncRing]:
    opened = FsyncRing.open()
    if opened is None:
        # Where the kernel has io_uring on, the ring must open; only a stated refusal skips
        # (the node then fsyncs in a worker thread, which the other commit tests cover).
        reason = _io_uring_refused()
        assert reason is not None, "io_uring is enabled here, yet FsyncRing.open() gave None"
        pytest.skip(f"no io_uring on this machine ({reason})")
    yield opened
    opened.close()


def _wait(ring: FsyncRing, count: int) -> list[tuple[int, int]]:
    done: list[tuple[int, int]] = []
    while len(done) < count:
        done += ring.wait_one()
    return done


def test_fsyncs_complete_with_their_tags_past_the_ring_size(ring: FsyncRing,
                                                            tmp_path: Path) -> None:
    fds = [os.open(tmp_path / name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
           for name in ("a", "b")]
    try:
        for round_no in range(1, 4 * ring.capacity):  # the rings wrap several times
            for fd in fds:
                os.write(fd, b"x" * 100)
            assert not ring.ready() or ring.reap() == []
            ring.submit(fds, round_no)
            assert sorted(_wait(ring, 2)) == [(round_no, 0), (round_no, 0)]
    finally:
        for fd in fds:
            os.close(fd)


def test_a_failed_fsync_reports_its_errno(ring: FsyncRing, tmp_path: Path) -> None:
    fd = os.open(tmp_path / "closed", os.O_WRONLY | os.O_CREAT)
    os.close(fd)  # fsync of a closed descriptor: EBADF, as os.fsync would raise
    ring.submit([fd], 7)
    assert _wait(ring, 1) == [(7, -errno.EBADF)]


def test_more_files_than_the_ring_holds_is_refused_before_anything_is_queued(
        ring: FsyncRing, tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        with pytest.raises(ValueError):
            ring.submit([fd] * (ring.capacity + 1), 1)
        assert not ring.ready()
        ring.submit([fd], 2)  # the ring is still usable
        assert _wait(ring, 1) == [(2, 0)]
    finally:
        os.close(fd)


def test_the_ring_is_readable_exactly_while_a_completion_waits(ring: FsyncRing,
                                                                tmp_path: Path) -> None:
    import select

    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        assert select.select([ring.fileno()], [], [], 0)[0] == []
        ring.submit([fd], 3)
        readable, _, _ = select.select([ring.fileno()], [], [], 10)
        assert readable == [ring.fileno()]
        assert ring.ready() and ring.reap() == [(3, 0)]
        assert select.select([ring.fileno()], [], [], 0)[0] == []  # reaped: quiet again
    finally:
        os.close(fd)


def test_close_twice_is_harmless(ring: FsyncRing) -> None:
    ring.close()
    ring.close()


def test_where_io_uring_is_refused_open_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fsync_ring.platform, "machine", lambda: "aarch64")
    assert FsyncRing.open() is None  # the ring's memory order is only argued for x86-64

    class RefusingLibc:
        @staticmethod
        def syscall(*args: object) -> int:
            return -1  # as io_uring_setup under kernel.io_uring_disabled=2 (EPERM)

    monkeypatch.setattr(fsync_ring.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(fsync_ring, "_libc", RefusingLibc)  # its syscall is static
    assert FsyncRing.open() is None


def test_a_kernel_without_cooperative_completions_still_gets_a_ring(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import ctypes
    import struct

    real = fsync_ring._libc()
    if FsyncRing.open() is None:
        pytest.skip(f"no io_uring on this machine ({_io_uring_refused()})")
    asked: list[int] = []

    class OldKernelLibc:
        """io_uring_setup as before 5.19: EINVAL for IORING_SETUP_COOP_TASKRUN."""

        @staticmethod
        def syscall(number: ctypes.c_long, *args: object) -> int:
            if number.value == fsync_ring._SYS_SETUP:
                flags = struct.unpack_from("=I", args[1], 8)[0]  # type: ignore[arg-type]
                asked.append(flags)
                if flags & fsync_ring._SETUP_COOP_TASKRUN:
                    ctypes.set_errno(errno.EINVAL)
                    return -1
            return int(real.syscall(number, *args))

    monkeypatch.setattr(fsync_ring, "_libc", lambda: OldKernelLibc)
    ring = FsyncRing.open()
    assert ring is not None and not ring.cooperative
    assert asked == [fsync_ring._SETUP_COOP_TASKRUN, 0]
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        ring.submit([fd], 5)
        assert _wait(ring, 1) == [(5, 0)]
    finally:
        os.close(fd)
        ring.close()


def test_a_ring_is_cooperative_where_the_kernel_allows(ring: FsyncRing) -> None:
    release = tuple(int(p) for p in platform.release().split(".")[:2] if p.isdigit())
    if release < (5, 19):
        pytest.skip(f"kernel {platform.release()} predates IORING_SETUP_COOP_TASKRUN")
    assert ring.cooperative
