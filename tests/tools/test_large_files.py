"""Files of a megabyte or more are mapped, not read: the same rows either way, damage too."""

from __future__ import annotations

from pathlib import Path

from kraftpy.tools.logdecode.paths import classify
from kraftpy.tools.logdecode.rows import file_rows
from support.metadata_logs import synthetic_cluster


def test_mapped_file_gives_the_same_rows(tmp_path: Path) -> None:
    w = synthetic_cluster(tmp_path / "__cluster_metadata-0", records=40_000, segment_bytes=1 << 30)
    [segment] = w.segments
    data = segment.read_bytes()
    assert len(data) > 1 << 20
    file = classify(segment)
    mapped = list(file_rows(file))
    assert mapped == list(file_rows(file, data=data))
    assert len(mapped) == w.records_written and all(r[12] is None for r in mapped)
    segment.write_bytes(data[:-5])
    torn = list(file_rows(file))
    assert torn[-1][12].startswith("torn-tail") and len(torn) < len(mapped)
