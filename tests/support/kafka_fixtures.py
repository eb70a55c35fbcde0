"""Session fixtures for real Kafka 4.1: its jars, one shared node, and the compiled Java client.

The shared node (`kafka_oracle`) is a combined broker and controller with a static voter set
(`controller.quorum.voters`, kraft.version 0), as `kraftpy serve` runs by default, so their
answers can be compared. Tests only read from it or write under names of their own, so it is
safe to share; a test that stops, kills or reconfigures a node starts its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kafka import KafkaNode, KafkaUnavailable, java_client_classes, kafka_libs


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    try:
        return kafka_libs()
    except KafkaUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="session")
def kafka_oracle(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
                 ) -> Iterator[KafkaNode]:
    root = tmp_path_factory.mktemp("kafka-oracle")
    node = KafkaNode(root, node_id=1, static_voter=True)
    node.format()
    node.start()
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture(scope="session")
def java_client(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path) -> Path:
    return java_client_classes(tmp_path_factory.mktemp("java-client"))
