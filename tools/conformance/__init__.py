"""A wire-level conformance suite for Kafka-compatible controllers.

Raw request bytes in, response fields checked: the KIP-511 ApiVersions rules, Metadata and
FindCoordinator as clients need them, the InitProducerId decision table (KIP-98/360), the
broker RPCs' error paths (KIP-631/730), DescribeCluster and DescribeQuorum, and every kind of
bad input, which Kafka answers by closing the connection. It runs against any server:
`kraftpy conformance --bootstrap HOST:PORT [--controller HOST:PORT]`, or from Python with
`run_checks(Target(...))`. Apache Kafka 4.1 passes it; so must kraftpy.

The broker suite (`kraftpy conformance --broker HOST:PORT`, `broker_suite.run_broker_checks`)
checks exactly-once semantics on a cluster's brokers the same way: idempotence (KIP-98),
KIP-360, transactions (KIP-98, KIP-890) and KIP-447, each check naming its KIP and rule.
"""

from kraftpy.tools.conformance.checks import CHECKS, CheckResult, Target, run_checks

__all__ = ["CHECKS", "CheckResult", "Target", "run_checks"]
