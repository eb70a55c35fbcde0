"""One local Spark session for every Spark test (a JVM costs ~5 s and ~450 MB to start).
Skipped cleanly without pyspark or Java."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    pytest.importorskip("pandas")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java on the PATH")
    from kraftpy.tools.spark.session import ARROW_JAVA_OPTIONS, local_session

    session = local_session("local[2]", app="kraftpy-tests", extra={
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.driver.memory": "1g",
        # quick to start; the rows are checked under the Arrow options local sessions run with
        "spark.driver.extraJavaOptions": f"-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                                         f"{ARROW_JAVA_OPTIONS}",
    })
    yield session
    session.stop()
