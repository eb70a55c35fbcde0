"""The data source freezes a reused Python worker's heap once, and only in such a worker."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture
def datasource(monkeypatch: pytest.MonkeyPatch):
    from kraftpy.tools.spark import datasource

    monkeypatch.setattr(datasource, "_FROZEN", [])
    yield datasource
    gc.unfreeze()


def test_reused_worker_heap_is_frozen_once(datasource, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    gc.unfreeze()
    datasource._freeze_worker_heap()
    frozen = gc.get_freeze_count()
    assert frozen > 1000
    junk = [[i] for i in range(100)]
    datasource._freeze_worker_heap()
    assert gc.get_freeze_count() == frozen  # the second task freezes nothing more
    del junk


def test_other_processes_are_left_alone(datasource, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    gc.unfreeze()
    datasource._freeze_worker_heap()
    assert gc.get_freeze_count() == 0
