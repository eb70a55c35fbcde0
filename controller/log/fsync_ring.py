"""fsync without a thread: Linux io_uring's IORING_OP_FSYNC.

Why not a worker thread: the thread needs the GIL to begin its fsync and again to report it,
and a busy event loop holds the GIL, so a round's fsync starts late and is seen late (measured
here: ~200 us each way under load, the length of an fsync). io_uring runs the fsync in the
kernel's own workers, on any CPU, while the loop goes on appending the next round; the loop
learns of the end by waiting for the ring's own descriptor to be readable, which it is while a
completion waits to be reaped, and reads the completions from a shared-memory ring (no system
call). Not an eventfd: that is signalled for every completion, even one
the loop has already reaped, and each such wake costs a task switch and two system calls.
The ring is cooperative where the kernel allows (5.19+): a completion is posted at the loop's
next system call rather than by interrupting its CPU (`open`).

Only two system calls and the two rings are used (`io_uring_setup`, `io_uring_enter`;
kernel 5.1+). The rings are read and written with `struct` on an mmap:
correct on x86-64, whose stores are seen in program order and whose loads are not reordered
with other loads, which is all the ring protocol asks of user space there. Anywhere else, or
when the kernel refuses (an old kernel, `kernel.io_uring_disabled`, a seccomp filter),
`FsyncRing.open` returns None and every round stays the Raft runner's own (on the loop, or in
a worker thread): see `raft/overlapped_rounds.py`.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import platform
import struct
import sys
from typing import Any

_SYS_SETUP, _SYS_ENTER = 425, 426  # x86-64 (the same on every arch since 5.1)
_OP_NOP, _OP_FSYNC = 0, 3
_SQE_ASYNC = 1 << 4  # IOSQE_ASYNC: straight to a kernel worker (an fsync would block anyway)
_FEAT_SINGLE_MMAP = 1
# IORING_SETUP_COOP_TASKRUN (5.19+): a completion is posted when the submitting thread next
# enters the kernel, instead of with an inter-processor interrupt into it (see `open`).
_SETUP_COOP_TASKRUN = 1 << 8
_OFF_SQ_RING, _OFF_CQ_RING, _OFF_SQES = 0, 0x8000000, 0x10000000
_SQE_SIZE, _CQE_SIZE = 64, 16

# struct io_uring_params: 10 u32, then io_sqring_offsets and io_cqring_offsets (8 u32 + u64 each).
_PARAMS = struct.Struct("=10I8IQ8IQ")
_SQE = struct.Struct("=BBHiQQIIQ16x")  # opcode flags ioprio fd off addr len op_flags user_data
_CQE = struct.Struct("=QiI")  # user_data res flags


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


class FsyncRing:
    """One io_uring for fsyncs: `submit` a round's files, then `reap` their completions."""

    def __init__(self, ring_fd: int, params: tuple[int, ...], libc: Any) -> None:
        self._libc = libc
        self._fd = ring_fd
        sq_entries, cq_entries, features = params[0], params[1], params[5]
        sq_off = params[10:17]  # head tail ring_mask ring_entries flags dropped array (bytes)
        cq_off = params[19:25]  # head tail ring_mask ring_entries overflow cqes (bytes)
        self.capacity = sq_entries
        self.cooperative = False  # completions posted at the next system call (`open`)
        self._cqes = cq_off[5]
        sq_size = sq_off[6] + sq_entries * 4
        cq_size = self._cqes + cq_entries * _CQE_SIZE
        flags, prot = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0), \
            mmap.PROT_READ | mmap.PROT_WRITE
        self._maps: list[mmap.mmap] = []
        try:
            if features & _FEAT_SINGLE_MMAP:
                self._sq = self._cq = self._map(max(sq_size, cq_size), _OFF_SQ_RING, flags, prot)
            else:
                self._sq = self._map(sq_size, _OFF_SQ_RING, flags, prot)
                self._cq = self._map(cq_size, _OFF_CQ_RING, flags, prot)
            self._sqes = self._map(sq_entries * _SQE_SIZE, _OFF_SQES, flags, prot)
        except BaseException:
            self.close()
            raise
        # u32 views of the rings; their u32 fields are 4-byte aligned, so index = offset // 4.
        self._sq32 = memoryview(self._sq).cast("I")
        self._cq32 = memoryview(self._cq).cast("I")
        self._sq_tail, self._sq_array = sq_off[1] // 4, sq_off[6] // 4
        self._cq_head, self._cq_tail = cq_off[0] // 4, cq_off[1] // 4
        self._sq_mask = self._sq32[sq_off[2] // 4]
        self._cq_mask = self._cq32[cq_off[2] // 4]

    def _map(self, size: int, offset: int, flags: int, prot: int) -> mmap.mmap:
        m = mmap.mmap(self._fd, size, flags=flags, prot=prot, offset=offset)
        self._maps.append(m)
        return m

    @classmethod
    def open(cls, entries: int = 16) -> FsyncRing | None:
        """A working ring, or None where io_uring cannot be used (then fsync in a thread)."""
        if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
            return None
        try:
            libc = _libc()
        except OSError:
            return None
        # Cooperative completions where the kernel has them. Without, each fsync's
        # completion interrupts the event loop's CPU to be posted, which costs the loop more
        # than it waits: the loop only looks between batches of tasks, and every such look is
        # a system call (trio's epoll_wait), where a cooperative completion is posted anyway
        # (measured: 64 writers on a 0.2 ms-fsync disk, 10% more operations per second).
        # A sleeping loop is woken as before. It asks that the thread reaping be the one
        # submitting: here both are the event loop's.
        for flags in (_SETUP_COOP_TASKRUN, 0):
            buf = ctypes.create_string_buffer(_PARAMS.size)
            struct.pack_into("=I", buf, 8, flags)  # io_uring_params.flags
            fd = libc.syscall(ctypes.c_long(_SYS_SETUP), ctypes.c_long(entries), buf)
            if fd >= 0 or not flags or ctypes.get_errno() != errno.EINVAL:
                break  # EINVAL for the flag: a kernel before 5.19, which gets a ring without
        if fd < 0:
            return None  # ENOSYS, EPERM (disabled or filtered), ...
        try:
            ring = cls(fd, _PARAMS.unpack(buf.raw), libc)
            ring.cooperative = bool(flags)
        except (OSError, ValueError):
            os.close(fd)
            return None
        try:  # a NOP round trip proves the rings are mapped and read as the kernel writes them
            ring.submit_ops([(_OP_NOP, -1, 0)])
            done = ring.wait_one()
            if done != [(0, 0)]:
                raise OSError(errno.EIO, f"io_uring NOP answered {done}")
        except OSError:
            ring.close()
            return None
        return ring

    def fileno(self) -> int:
        """The ring's descriptor: readable while a completion waits to be reaped."""
        return self._fd

    def submit(self, fds: list[int], user_data: int) -> None:
        """Queue a full fsync of each file (all tagged `user_data`) and hand them to the kernel."""
        self.submit_ops([(_OP_FSYNC, fd, user_data) for fd in fds], _SQE_ASYNC)

    def submit_ops(self, ops: list[tuple[int, int, int]], flags: int = 0) -> None:
        if not ops:
            return
        if len(ops) > self.capacity:
            raise ValueError(f"{len(ops)} operations for a ring of {self.capacity}")
        sq32, sqes, mask, array = self._sq32, self._sqes, self._sq_mask, self._sq_array
        tail = sq32[self._sq_tail]
        for opcode, fd, user_data in ops:
            index = tail & mask
            _SQE.pack_into(sqes, index * _SQE_SIZE, opcode, flags, 0, fd, 0, 0, 0, 0, user_data)
            sq32[array + index] = index
            tail = (tail + 1) & 0xFFFFFFFF
        sq32[self._sq_tail] = tail  # after the entries: the kernel reads them from here on
        done = self._libc.syscall(ctypes.c_long(_SYS_ENTER), ctypes.c_long(self._fd),
                                  ctypes.c_long(len(ops)), ctypes.c_long(0), ctypes.c_long(0),
                                  None, ctypes.c_long(0))
        if done != len(ops):
            code = ctypes.get_errno() if done < 0 else errno.EAGAIN
            raise OSError(code, f"io_uring_enter submitted {done} of {len(ops)}")

    def ready(self) -> bool:
        """Whether a completion waits to be reaped: two reads of shared memory."""
        cq32 = self._cq32
        return cq32[self._cq_head] != cq32[self._cq_tail]

    def reap(self) -> list[tuple[int, int]]:
        """(user_data, result) of every completion posted so far; result < 0 is -errno."""
        cq, cq32, cqes, mask = self._cq, self._cq32, self._cqes, self._cq_mask
        head, tail = cq32[self._cq_head], cq32[self._cq_tail]
        out = []
        while head != tail:
            user_data, res, _ = _CQE.unpack_from(cq, cqes + (head & mask) * _CQE_SIZE)
            out.append((user_data, res))
            head = (head + 1) & 0xFFFFFFFF
        cq32[self._cq_head] = head  # the entries may be reused from here on
        return out

    def wait_one(self) -> list[tuple[int, int]]:
        """Block (outside an event loop) until a completion arrives; for `open`'s self-test."""
        import select

        while not self.ready():
            select.select([self._fd], [], [], 1.0)
        return self.reap()

    def close(self) -> None:
        for view in (getattr(self, "_sq32", None), getattr(self, "_cq32", None)):
            if view is not None:
                view.release()
        for m in self._maps:
            m.close()
        self._maps = []
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = -1
