"""Batch header lines against Kafka's own dump of the same real Kafka 4.1 files."""

from __future__ import annotations

from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.tools.logdecode.dumptext import batch_line, file_header
from kraftpy.tools.logdecode.model import batch_info
from kraftpy.tools.logdecode.paths import expand
from support.paths import reference


def test_batch_lines_match_kafka_dump_log() -> None:
    root = reference("real-metadata-logs", "kafka-4.1-generated")
    expected = [line for line in (root / "dump-cluster-metadata.txt").read_text().splitlines()
                if not line.startswith("| ")]
    ours: list[str] = []
    for file in expand([root / "data" / "__cluster_metadata-0"]):
        ours += file_header(file, f"data/__cluster_metadata-0/{file.path.name}")
        data = file.path.read_bytes()
        ours += [batch_line(batch_info(b), b.position) for b in iter_record_batches(data)]
    assert len(ours) == len(expected)
    assert ours == expected
