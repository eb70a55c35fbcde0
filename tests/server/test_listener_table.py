"""The listener table (docs/serve.md) lists exactly what each listener advertises in ApiVersions."""

from __future__ import annotations

import re
from pathlib import Path

from kraftpy.controller import api
from kraftpy.protocol.registry import API_KEYS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "serve.md"
ROWS = {"client": api.BROKER, "CONTROLLER": api.CONTROLLER}


def _table() -> dict[str, set[str]]:
    rows = {}
    for line in PAGE.read_text().splitlines():
        m = re.fullmatch(r"\| (client|CONTROLLER)\b[^|]* \| (.+) \|", line)
        if m:
            rows[m.group(1)] = {item.strip() for item in m.group(2).split(",")}
    return rows


def test_the_listener_table_is_what_each_listener_serves() -> None:
    table = _table()
    assert set(table) == set(ROWS)
    for row, kind in ROWS.items():
        served = {f"{API_KEYS[key].request.__name__.removesuffix('Request')} "
                  + (f"{lo}" if lo == hi else f"{lo}-{hi}")
                  for key, lo, hi in api.served(kind)}
        assert table[row] == served, (row, table[row] ^ served)
