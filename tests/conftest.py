"""Suite-wide test settings.

Property tests draw the same examples on every run (derandomized, seeded from each test), so a
run on a fresh machine tests exactly what a run here tested. `HYPOTHESIS_PROFILE=explore`
draws fresh random examples instead, to search wider.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

# Real Apache Kafka 4.1 (tests/support/kafka.py): the jars, a shared node and the Java client;
# and exactly-once data written by Kafka 4.1 brokers on kraftpy (tests/support/eos_workload.py).
# Each is started only by the tests that ask for it.
from support.eos_workload import eos_logs  # noqa: E402, F401
from support.kafka_fixtures import java_client, kafka_jars, kafka_oracle  # noqa: E402, F401
