"""Requests answered per API and version, and how long a sample of them took.

Kafka's RequestMetrics count every request (RequestsPerSec, by request and version) and time
every one (TotalTimeMs, by request). Here `dispatch` adds one to a per-(key, version) cell
its route holds (no lookup per request) and times one request in `SAMPLE_EVERY` per route;
quick answers add their count once per run of answers. The cells are the process's, as
Kafka's metrics registry is; the metrics endpoint reads them when scraped.
"""

from __future__ import annotations

import struct

from kraftpy.controller.metrics_stats import Timings

# A request is timed when its route's count is a multiple of this (a power of two: a mask).
SAMPLE_EVERY = 8
SAMPLE_MASK = SAMPLE_EVERY - 1

_KEY_VERSION = struct.Struct(">hh")
# A frame's first four bytes (api key, version) -> [requests answered].
_CELLS: dict[bytes, list[int]] = {}
# api key -> the sampled times of its requests, in seconds.
TIMINGS: dict[int, Timings] = {}


def cell(api_key: int, version: int) -> list[int]:
    """The counter of (api_key, version), shared by every route and quick answer of it."""
    return cell_of(_KEY_VERSION.pack(api_key, version))


def cell_of(prefix: bytes) -> list[int]:
    found = _CELLS.get(prefix)
    if found is None:
        found = _CELLS[prefix] = [0]
    return found


def timed(api_key: int, seconds: float, at: float) -> None:
    """One sampled request of `api_key` took `seconds` (seen at `at`, perf_counter)."""
    timings = TIMINGS.get(api_key)
    if timings is None:
        timings = TIMINGS[api_key] = Timings()
    timings.observe(seconds, at)


def counts() -> list[tuple[int, int, int]]:
    """(api key, version, requests answered) for every pair answered at least once."""
    out = []
    for prefix, found in _CELLS.items():
        if found[0]:
            key, version = _KEY_VERSION.unpack(prefix)
            out.append((key, version, found[0]))
    return sorted(out)
