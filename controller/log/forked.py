"""Run a piece of file-writing work in a forked child, and wait for it without the GIL.

Encoding a snapshot of a large image is Python work: in a worker thread it takes the GIL in
turns with the event loop, so for the seconds it lasts every heartbeat and fetch waits behind
it, and it runs on one core. A child forked at that moment holds a copy-on-write view of the
state as it stood (the image is held while the job runs, so that view is the one the snapshot
is of), writes on the other core, and the parent's worker thread only reads a pipe until the
child exits. Redis writes its snapshots this way.

The child closes every descriptor it inherited but stdio and its pipe (a socket the parent
closes must not stay open in it), dies with the thread that forked it (PR_SET_PDEATHSIG: an
orphan must not go on writing into a directory a restarted node owns), and leaves with
`os._exit` (nothing of the parent's is flushed or cleaned up twice). Its failure comes back to
the parent as the exception it raised: an OSError with its errno, anything else as a
RuntimeError.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import warnings
from collections.abc import Callable, Sequence

# Python 3.12 warns of any fork beside other threads; what the child does here (encode and
# write a file, no lock the other threads may hold) is what that warning allows.
warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks",
                        category=DeprecationWarning)

_PR_SET_PDEATHSIG = 1
_SIGKILL = 9


def available() -> bool:
    return sys.platform == "linux" and hasattr(os, "fork")


def call_in_child(work: Callable[[], object]) -> None:
    """`work()` in a forked child; returns when it has finished, raises what it raised."""
    call_in_children([work])


def call_in_children(works: Sequence[Callable[[], object]]) -> None:
    """Each of `works` in a child of its own, all at once (a large snapshot is encoded in
    parts, one per core); returns when every child has finished, raises the first failure
    (in the order of `works`) once all have."""
    parent = os.getpid()
    started: list[tuple[int, int]] = []  # (pid, read end of its pipe)
    try:
        for work in works:
            read_end, write_end = os.pipe()
            try:
                pid = os.fork()
            except OSError:
                os.close(read_end)
                os.close(write_end)
                raise
            if pid == 0:
                _child(work, parent, read_end, write_end)  # never returns
            os.close(write_end)
            started.append((pid, read_end))
    finally:
        # Every child started is waited for, whatever happens to the ones after it.
        failures = [_wait(pid, read_end) for pid, read_end in started]
    for failure in failures:
        if failure is not None:
            raise failure


def _wait(pid: int, read_end: int) -> BaseException | None:
    """Read the child's pipe to its end, reap it: None, or the exception it reported."""
    chunks = []
    try:
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
    finally:
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code == 0:
        return None
    number, _, message = b"".join(chunks).decode(errors="replace").partition("\n")
    if not message:
        return OSError(errno.EIO, f"the writer process ended with status {code} and no word")
    if number != "0":
        return OSError(int(number), message)
    return RuntimeError(message)


def _child(work: Callable[[], object], parent: int, read_end: int, write_end: int) -> None:
    code = 0
    try:
        _die_with_parent(parent)
        os.close(read_end)
        _close_inherited(keep=write_end)
        work()
    except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
        code = 1
        if isinstance(exc, OSError) and exc.errno:
            number, text = exc.errno, exc.strerror or str(exc)
            if exc.filename is not None:
                text = f"{text}: '{exc.filename}'"
        else:
            number, text = 0, f"{type(exc).__name__}: {exc}"
        try:
            os.write(write_end, f"{number}\n{text}".encode(errors="replace")[:8192])
        except OSError:
            pass
    finally:
        os._exit(code)


def _die_with_parent(parent: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def _close_inherited(keep: int) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the listing's own descriptor, closed already
