"""Where the optional reference material lives; tests that need it skip cleanly without it."""

from __future__ import annotations

from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
SHARED = PROJECT.parent / "shared"
REFERENCE = SHARED / "reference"


def reference(*parts: str) -> Path:
    """A path under ../shared/reference, or skip the calling test when it is not there."""
    path = REFERENCE.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"reference material not present: {path}")
    return path
