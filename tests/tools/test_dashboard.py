"""The Grafana dashboard in tools/dashboards: every query names metrics kraftpy exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kraftpy.controller.metrics import NodeCollector, exported_names
from kraftpy.controller.metrics_http import MetricsAddress, MetricsServer

DASHBOARDS = Path(__file__).resolve().parents[2] / "tools" / "dashboards"

# PromQL's own words (functions, aggregations, modifiers) that look like names.
PROMQL = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
    "bool", "and", "or", "unless", "offset", "rate", "irate", "increase", "delta", "idelta",
    "deriv", "histogram_quantile", "label_replace", "label_join", "abs", "ceil", "floor",
    "round", "clamp_min", "clamp_max", "time", "vector", "scalar", "sort", "sort_desc",
    "avg_over_time", "max_over_time", "min_over_time", "sum_over_time", "changes", "resets",
    "absent", "label_values", "inf", "nan",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL query (or Grafana's label_values()) reads."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, regexes)
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # groupings
    expr = re.sub(r",\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)", ")", expr)  # label_values(m, label)
    words = set(re.findall(r"(?<![\w.])[a-zA-Z_:][a-zA-Z0-9_:]*", expr))
    return {w for w in words if w.lower() not in PROMQL and not re.fullmatch(r"\d+\w*", w)}


def queries(dashboard: dict[str, Any]) -> list[str]:
    found = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "definition") and isinstance(value, str):
                    found.append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
    walk(dashboard)
    return found


def served_names() -> set[str]:
    """What the endpoint serves: the node's catalog and the process collectors' series."""
    server = MetricsServer(MetricsAddress("127.0.0.1", 0), NodeCollector(1, Path(".")))
    names = set(exported_names())
    for family in server.registry.collect():
        names.update(sample.name for sample in family.samples)
    return names


def test_metric_names_are_read_out_of_promql() -> None:
    assert metric_names('sum by (request) (rate(a_total{instance=~"$i",x="y{"}[1m]))') == \
        {"a_total"}
    assert metric_names("rate(a_sum[5m]) / rate(a_count[5m]) * 1000") == {"a_sum", "a_count"}
    assert metric_names("label_values(b_gauge, instance)") == {"b_gauge"}


def test_every_dashboard_query_names_exported_metrics() -> None:
    files = sorted(DASHBOARDS.glob("*.json"))
    assert files, "no dashboard in tools/dashboards"
    served = served_names()
    for path in files:
        dashboard = json.loads(path.read_text())
        exprs = queries(dashboard)
        assert len(exprs) >= 10, path
        for expr in exprs:
            names = metric_names(expr)
            assert names, f"{path.name}: {expr!r} names no metric"
            assert names <= served, f"{path.name}: {expr!r} reads {names - served}"
        panels = [p for p in dashboard["panels"] if p["type"] != "row"]
        assert all(p["targets"] for p in panels)
