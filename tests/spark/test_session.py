"""The local session's Python workers talk to the executor over Unix domain sockets (over
loopback TCP, Nagle's algorithm and delayed ACKs idle every task for 40 ms)."""

from __future__ import annotations

import os
import socket

import pytest

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="no Unix domain sockets")


def _worker_transport(_: object) -> str:
    return os.environ.get("PYTHON_UNIX_DOMAIN_ENABLED", "").lower()


def test_workers_use_unix_domain_sockets(spark) -> None:
    assert spark.conf.get("spark.python.unix.domain.socket.enabled") == "true"
    seen = spark.sparkContext.parallelize(range(2), 2).map(_worker_transport).collect()
    assert seen == ["true", "true"]
