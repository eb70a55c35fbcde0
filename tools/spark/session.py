"""A local Spark session that starts quietly and works offline, and the data source registered.

The settings are the ones that matter on a small machine: workers must run this interpreter
(else they lack pyarrow and kraftpy), everything binds to loopback, no UI, few shuffle
partitions, and log noise only at ERROR.

The executor talks to its Python workers over Unix domain sockets, not loopback TCP. Over TCP
each task's input (the pickled reader, then the partition) leaves the JVM in two small writes,
and the second waits for the worker's delayed ACK (Nagle's algorithm): 40 ms of idle time per
task, whatever the file's size (~52 -> ~10 ms per task on 104 tiny files at local[1]).

In local mode the executor is the driver JVM, and its CPU per row is most of what Spark adds
to the decoder's own. `LOCAL_JAVA_OPTIONS` raise the JIT's thresholds for its optimising tier
(C2) ten- to twentyfold: with the defaults, C2 keeps compiling Spark's planner and per-query code for
millions of rows and costs more than it saves; C1 alone (TieredStopAtLevel=1) compiles little
but leaves the per-row code twice as slow. Letting only the row loops reach C2 gives the
least JVM CPU per 286k rows: 0.45 s, against 0.6 s at C1 alone and 1.0 s with the defaults. They also drop
Arrow's per-value bounds and null checks, which Spark's generated code makes needless by testing
for null first. The serial collector replaces G1, whose concurrent and parallel GC threads took
~0.1 s more CPU per 1.4M rows for a heap this small.
"""

from __future__ import annotations

import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_conf_dir() -> str:
    conf = Path(tempfile.gettempdir()) / "kraftpy-spark-conf"
    conf.mkdir(exist_ok=True)
    target = conf / "log4j2.properties"
    if not target.exists() or target.read_text() != _LOG4J:
        target.write_text(_LOG4J)
    return str(conf)


JIT_JAVA_OPTIONS = ("-XX:Tier4InvocationThreshold=100000 -XX:Tier4MinInvocationThreshold=50000 "
                    "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")
ARROW_JAVA_OPTIONS = ("-Darrow.enable_unsafe_memory_access=true "
                      "-Darrow.enable_null_check_for_get=false")
GC_JAVA_OPTIONS = "-XX:+UseSerialGC"
LOCAL_JAVA_OPTIONS = f"{JIT_JAVA_OPTIONS} {ARROW_JAVA_OPTIONS} {GC_JAVA_OPTIONS}"


def local_session(master: str = "local[*]", *, app: str = "kraftpy",
                  extra: dict[str, Any] | None = None) -> SparkSession:
    """A session for `master` (local[*] by default), with the data source registered.

    `extra` overrides any setting (`spark.driver.extraJavaOptions` replaces
    `LOCAL_JAVA_OPTIONS`). When the process was started by spark-submit or the pyspark shell, use
    `SparkSession.builder.getOrCreate()` and `register()` instead: the launcher's settings
    then win.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("SPARK_CONF_DIR", _quiet_conf_dir())
    conf: dict[str, Any] = {
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.parquet.compression.codec": "zstd",
        "spark.sql.sources.partitionOverwriteMode": "dynamic",
        "spark.python.worker.reuse": "true",
    }
    if hasattr(socket, "AF_UNIX"):
        conf["spark.python.unix.domain.socket.enabled"] = "true"
    if master.startswith("local"):
        conf["spark.driver.extraJavaOptions"] = LOCAL_JAVA_OPTIONS
    conf.update(extra or {})
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> SparkSession:
    """Make `spark.read.format("kraft-metadata")` and `format("kafka-log")` available in this
    session."""
    from .datasource import KafkaLogDataSource, KraftMetadataDataSource

    spark.dataSource.register(KraftMetadataDataSource)
    spark.dataSource.register(KafkaLogDataSource)
    return spark
