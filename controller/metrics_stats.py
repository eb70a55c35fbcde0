"""Timings the node keeps for its metrics: counts, sums and a window of recent samples.

The hot paths only add to these (`observe`: two additions and a bounded append, no lock,
no clock of their own; the caller passes the time it already read). Everything else (the
quantiles Kafka's histograms report, averages and maxima over Kafka's metric window) is
computed when the metrics are scraped, on the event loop that also does the adding, so a
scrape never sees a half-made update.
"""

from __future__ import annotations

from collections import deque

# As many recent samples as a Yammer histogram's reservoir holds (Kafka's histograms), so
# the quantiles describe about as many recent events as Kafka's do.
RESERVOIR = 1028
# Kafka's metric window for rates, averages and maxima: 2 samples of 30 s.
WINDOW_S = 60.0
# Kafka's histogram percentiles, labelled as the JMX exporter labels them ("0.$1" of 50th...).
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99),
             ("0.999", 0.999))


class Timings:
    """Durations (in the caller's unit) with the monotonic time each was seen at."""

    __slots__ = ("count", "sum", "recent")

    def __init__(self) -> None:
        self.count = 0
        self.sum = 0.0
        self.recent: deque[tuple[float, float]] = deque(maxlen=RESERVOIR)

    def observe(self, value: float, at: float) -> None:
        self.count += 1
        self.sum += value
        self.recent.append((at, value))

    def quantiles(self) -> list[tuple[str, float]]:
        """(label, value) for Kafka's reported quantiles over the recent samples (0 with
        none, as an empty Yammer histogram reports)."""
        values = sorted(v for _, v in self.recent)
        if not values:
            return [(label, 0.0) for label, _ in QUANTILES]
        last = len(values) - 1
        return [(label, _at(values, q * (last + 2) - 1, last)) for label, q in QUANTILES]

    def window(self, now: float, window_s: float = WINDOW_S) -> tuple[float, float]:
        """(average, maximum) of the samples seen within `window_s` before `now`: NaN for
        both when there are none, as Kafka's Avg and Max report an empty window."""
        since = now - window_s
        values = [v for at, v in self.recent if at >= since]
        if not values:
            return float("nan"), float("nan")
        return sum(values) / len(values), max(values)


def _at(values: list[float], pos: float, last: int) -> float:
    """Yammer's Snapshot.getValue: linear interpolation at `pos`, which is q * (n + 1)
    counted from 0 (so one less than Yammer's 1-based position)."""
    if pos < 0:
        return values[0]
    if pos >= last:
        return values[last]
    low = int(pos)
    return values[low] + (pos - low) * (values[low + 1] - values[low])
