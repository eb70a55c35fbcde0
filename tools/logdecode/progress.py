"""A progress bar over files, by bytes, on a terminal only (never in pipes or logs)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from .paths import LogFile


class Progress:
    def __init__(self, files: Sequence[LogFile], stream: IO[str]) -> None:
        from tqdm import tqdm

        total = sum(_size(f.path) for f in files)
        self._bar = tqdm(total=total, unit="B", unit_scale=True, file=stream, leave=False,
                         desc="decoding")

    @classmethod
    def maybe(cls, files: Sequence[LogFile], *, enabled: bool | None, stream: IO[str]) -> Progress | None:
        """A bar when asked (`enabled` True) or, by default, when `stream` is a terminal."""
        if enabled is False:
            return None
        if not (hasattr(stream, "isatty") and stream.isatty()):
            return None
        return cls(files, stream)

    def advance(self, path: Path) -> None:
        self._bar.update(_size(path))

    def close(self) -> None:
        self._bar.close()


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
