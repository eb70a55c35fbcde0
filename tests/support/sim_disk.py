"""The whole-node simulation's disk: real files, what of them is durable, and its faults.

`SimFS` stands in for `os` in the log's modules (`segment`, `partition_log`, `files`,
`snapshots`, `snapshot_download`, `index`) for the life of a simulation: the calls are the
real ones on real files (a tmpfs), and besides them it records, at each fsync, how many bytes
of that file are durable. A power loss (`capture` with `tear`) keeps of every file what was
fsynced and a random part of what was written after it, the end of that part sometimes zeroed
(a torn write, possibly mid-batch); directories as they are (the log makes its renames and
deletions durable at once). Faults are injected per node directory (`DiskFaults`): the power
going at its N-th disk operation (`SimCrash`, raised through whatever code runs, with the
directory captured at that instant), fsyncs failing (EIO), a full disk (ENOSPC after a short
write; at a snapshot's fsync, as delayed allocation finds it). It also seeds what production
draws at random (`uuid.uuid4`, an unseeded `random.Random()`, file names' `secrets`).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftpy.controller import topic_control
from kraftpy.controller.log import (
    files,
    index,
    partition_log,
    segment,
    snapshot_download,
    snapshots,
)
from kraftpy.controller.raft import runner as raft_runner

SIMULATED = "[simulated]"  # in the message of every injected OSError
_LOG_MODULES = (segment, partition_log, files, snapshots, snapshot_download, index)


class SimCrash(BaseException):
    """The node lost power in the middle of a disk operation (raised through the code that
    was running, whatever it catches)."""


# ----- the disk --------------------------------------------------------------------------------
@dataclass
class DiskFaults:
    """One node's disk: what goes wrong with it next."""

    full: bool = False  # writes fail with ENOSPC (after one short write)
    short_written: bool = False
    fsync_fails: int = 0  # the next N fsyncs fail with EIO
    crash_in: int | None = None  # power goes at the N-th disk operation from now
    slow_until: float = 0.0  # flush rounds and snapshot writes are slow until then
    quiet: bool = False  # the node's files are being let go after a crash: nothing injected


class _Os:
    """The `os` the log modules see: the real one, with writes, fsyncs, opens and renames
    going through `SimFS`."""

    def __init__(self, fs: SimFS) -> None:
        self._fs = fs
        self.open = fs.open
        self.write = fs.write
        self.fsync = fs.fsync
        self.replace = fs.replace
        self.dup = fs.dup
        self.close = fs.close

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


class _Secrets:
    """File-name randomness (`.part` names) from the schedule."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def randbelow(self, n: int) -> int:
        return self._rng.randrange(n)

    def randbits(self, k: int) -> int:
        return self._rng.getrandbits(k)


class _Random:
    """`random` as the runner and topic placement see it: an unseeded `Random()` is seeded
    from the schedule."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def Random(self, *args: Any) -> random.Random:  # noqa: N802 - the module's own name
        return random.Random(*args) if args else random.Random(self._rng.random())

    def __getattr__(self, name: str) -> Any:
        return getattr(random, name)


class SimFS:
    """Real files under `root` (one directory per node), how much of each is durable, and the
    disk's faults. Installed into the log modules for the life of a simulation."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root = str(root)
        self.rng = rng
        self.durable: dict[str, int] = {}  # path -> bytes fsynced (what a power loss keeps)
        self.faults: dict[str, DiskFaults] = {}  # node dir name -> its disk's faults
        self.captured: dict[str, dict[str, bytes | None]] = {}  # node dir -> crash image
        self.ops = 0
        self._fds: dict[int, str] = {}
        self._saved: list[tuple[Any, str, Any]] = []

    # --- installing ----------------------------------------------------------------------------
    def install(self, prod_rng: random.Random) -> None:
        proxy, secrets_ = _Os(self), _Secrets(prod_rng)
        for module in _LOG_MODULES:
            self._patch(module, "os", proxy)
        self._patch(snapshots, "secrets", secrets_)
        self._patch(snapshot_download, "secrets", secrets_)
        seeded = _Random(prod_rng)
        self._patch(raft_runner, "random", seeded)
        self._patch(topic_control, "random", seeded)
        self._patch(uuid, "uuid4",
                    lambda: uuid.UUID(int=prod_rng.getrandbits(128), version=4))

    def _patch(self, target: Any, name: str, value: Any) -> None:
        self._saved.append((target, name, getattr(target, name)))
        setattr(target, name, value)

    def uninstall(self) -> None:
        while self._saved:
            target, name, value = self._saved.pop()
            setattr(target, name, value)

    # --- which node, what is durable -----------------------------------------------------------
    def node_dir(self, path: str) -> str | None:
        root = self.root
        if not path.startswith(root) or len(path) <= len(root) + 1:
            return None
        return path[len(root) + 1:].split("/", 1)[0]

    def _faults_of(self, path: str) -> DiskFaults | None:
        name = self.node_dir(path)
        return None if name is None else self.faults.get(name)

    def _path(self, fd: int) -> str:
        path = self._fds.get(fd)
        return path if path is not None else os.readlink(f"/proc/self/fd/{fd}")

    def _op(self, path: str) -> DiskFaults | None:
        """One disk operation of a node: the power goes here if it is due."""
        self.ops += 1
        faults = self._faults_of(path)
        if faults is None or faults.quiet:
            return None
        if faults.crash_in is not None:
            faults.crash_in -= 1
            if faults.crash_in <= 0:
                faults.crash_in = None
                name = self.node_dir(path)
                assert name is not None
                self.captured[name] = self.capture(name, tear=True)
                raise SimCrash(name)
        return faults

    # --- the calls ------------------------------------------------------------------------------
    def open(self, path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        text = os.fspath(path)
        self._op(text)
        created = bool(flags & os.O_CREAT) and not os.path.exists(text)
        fd = os.open(path, flags, mode, **kwargs)
        if created:
            self.durable[text] = 0
        self._fds[fd] = text
        return fd

    def dup(self, fd: int) -> int:
        new = os.dup(fd)
        path = self._fds.get(fd)
        if path is not None:
            self._fds[new] = path
        return new

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        os.close(fd)

    def write(self, fd: int, data: Any) -> int:
        faults = self._op(self._path(fd))
        if faults is not None and faults.full:
            if not faults.short_written and len(data) > 1:
                faults.short_written = True
                return os.write(fd, bytes(data[:self.rng.randint(1, len(data) - 1)]))
            raise OSError(errno.ENOSPC, f"No space left on device {SIMULATED}")
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        path = self._path(fd)
        faults = self._op(path)
        if faults is not None:
            if faults.fsync_fails > 0:
                faults.fsync_fails -= 1
                raise OSError(errno.EIO, f"Input/output error {SIMULATED}")
            if faults.full and path.endswith(snapshots.PART_SUFFIX):
                # delayed allocation: a snapshot's blocks are found missing at its fsync
                raise OSError(errno.ENOSPC, f"No space left on device {SIMULATED}")
        os.fsync(fd)
        stat = os.fstat(fd)
        if stat.st_mode & 0o170000 == 0o100000:  # a regular file
            self.durable[path] = stat.st_size

    def replace(self, src: Any, dst: Any) -> None:
        source, target = os.fspath(src), os.fspath(dst)
        self._op(target)
        os.replace(src, dst)
        self.durable[target] = self.durable.pop(source, 0)

    # --- crashes --------------------------------------------------------------------------------
    def mark_durable(self, name: str) -> None:
        """Every file under the node's directory is durable as it is (written before the
        simulation began)."""
        for dirpath, _, filenames in os.walk(os.path.join(self.root, name)):
            for file_name in filenames:
                path = os.path.join(dirpath, file_name)
                self.durable[path] = os.path.getsize(path)

    def capture(self, name: str, *, tear: bool) -> dict[str, bytes | None]:
        """What the node's directory holds after a power loss now: each file its fsynced
        bytes and a random part of the rest (its end sometimes zeroed); directories as they
        are (renames and deletions are made durable at once by the log)."""
        image: dict[str, bytes | None] = {}
        top = os.path.join(self.root, name)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            image[dirpath] = None
            for file_name in sorted(filenames):
                path = os.path.join(dirpath, file_name)
                with open(path, "rb") as f:
                    data = f.read()
                kept = min(self.durable.get(path, 0), len(data))
                if tear and len(data) > kept:
                    cut = self.rng.randint(kept, len(data))
                    torn = bytearray(data[:cut])
                    if cut > kept and self.rng.random() < 0.3:
                        zero_from = self.rng.randint(kept, cut - 1)
                        torn[zero_from:cut] = bytes(cut - zero_from)
                    data = bytes(torn)
                image[path] = data
        return image

    def restore(self, name: str, image: dict[str, bytes | None]) -> None:
        """The node's directory becomes `image`, all of it durable (what a disk holds after
        a reboot is on it)."""
        top = os.path.join(self.root, name)
        shutil.rmtree(top, ignore_errors=True)
        for path in sorted(image):
            data = image[path]
            if data is None:
                os.makedirs(path, exist_ok=True)
        for path, data in image.items():
            if data is not None:
                with open(path, "wb") as f:
                    f.write(data)
        prefix = top + "/"
        for path in [p for p in self.durable if p.startswith(prefix)]:
            del self.durable[path]
        for path, data in image.items():
            if data is not None:
                self.durable[path] = len(data)
