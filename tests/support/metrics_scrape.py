"""Reading a node's /metrics as Prometheus would: the tests' one scraper."""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def scrape(url: str) -> dict[str, tuple[str, dict[tuple[tuple[str, str], ...], float]]]:
    """name -> (type, {sorted labels: value}) for every sample of every family."""
    status, text = get(url + "/metrics")
    assert status == 200
    out: dict[str, tuple[str, dict]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            out.setdefault(sample.name, (family.type, {}))[1][key] = sample.value
    return out


def value(metrics: dict, name: str, **labels: str) -> float:
    return metrics[name][1][tuple(sorted(labels.items()))]
