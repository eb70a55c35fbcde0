"""The data source freezes a reused Python worker's heap after each task, and only there."""

from __future__ import annotations

import gc

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")


@pytest.fixture
def datasource():
    from kraftpy.tools.spark import datasource

    gc.unfreeze()
    yield datasource
    gc.unfreeze()


def _reader(datasource, path: str):
    reader = datasource.KraftMetadataReader({"path": path})
    (partition,) = reader.partitions()
    return reader, partition


def test_a_reused_worker_freezes_what_each_task_leaves(datasource, tmp_path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from support.metadata_logs import realistic_cluster

    realistic_cluster(tmp_path / "__cluster_metadata-0", records=300, segment_bytes=1 << 30,
                      seed=1)
    (log,) = sorted(str(p) for p in tmp_path.rglob("*.log"))
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    reader, partition = _reader(datasource, log)
    batches = list(reader.read(partition))
    assert sum(b.num_rows for b in batches) == 300
    after_first = gc.get_freeze_count()
    assert after_first > 1000  # the worker's modules and the task's caches
    kept = [[i] for i in range(100)]  # made before the next task and still referenced
    assert any(o is kept for o in gc.get_objects())  # the collector still walks it
    list(reader.read(partition))
    assert not any(o is kept for o in gc.get_objects())  # frozen: full collections skip it
    del kept


def test_a_task_stopped_early_still_freezes(datasource, tmp_path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from support.metadata_logs import realistic_cluster

    realistic_cluster(tmp_path / "__cluster_metadata-0", records=300, segment_bytes=1 << 30,
                      seed=2)
    (log,) = sorted(str(p) for p in tmp_path.rglob("*.log"))
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    reader, partition = _reader(datasource, log)
    rows = reader.read(partition)
    next(rows)
    assert gc.get_freeze_count() == 0
    rows.close()  # as when Spark stops consuming (a limit)
    assert gc.get_freeze_count() > 1000


def test_other_processes_are_left_alone(datasource, tmp_path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from support.metadata_logs import realistic_cluster

    realistic_cluster(tmp_path / "__cluster_metadata-0", records=50, segment_bytes=1 << 30,
                      seed=3)
    (log,) = sorted(str(p) for p in tmp_path.rglob("*.log"))
    monkeypatch.delenv("SPARK_REUSE_WORKER", raising=False)
    reader, partition = _reader(datasource, log)
    list(reader.read(partition))
    assert gc.get_freeze_count() == 0
