"""What the metrics' hot-path counters cost, in one process: paired, alternating rounds.

    python3 benchmarks/metrics_cost.py [--rounds 40]

- AllocateProducerIds handled and applied (as benchmarks/controller.py does), with the
  per-broker block count in `ProducerIdControlManager.replay` and with a replay that does
  the same without it: CPU time per operation, the median and quartiles of the per-round
  ratios;
- the per-round and per-pass `Timings.observe`, and dispatch's per-request count and
  sample test, by timeit.

End to end, compare the 64-writer rows of benchmarks/log.py of two commits in alternating
runs; docs/benchmarks.md gives both.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
import uuid

from kraftpy.controller import producer_id_control
from kraftpy.controller.cluster_control import ReplayError
from kraftpy.controller.metrics_stats import Timings
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
)

from controller import Node  # benchmarks/controller.py

Manager = producer_id_control.ProducerIdControlManager


def replay_without_count(self: Manager, record: object) -> None:
    """`ProducerIdControlManager.replay` as it was before the metrics."""
    if record.next_producer_id <= self.next_producer_id:  # type: ignore[attr-defined]
        raise ReplayError("next producer id is not greater")
    self.next_producer_id = record.next_producer_id  # type: ignore[attr-defined]
    self.issued = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    rounds = parser.parse_args().rounds
    node = Node()
    node.handle(BrokerRegistrationRequest(
        broker_id=2, cluster_id="bench-cluster", incarnation_id=uuid.uuid4(),
        features=[Feature(name="metadata.version", min_supported_version=7,
                          max_supported_version=27)], log_dirs=[uuid.uuid4()]), 4)
    request = AllocateProducerIdsRequest(broker_id=2,
                                         broker_epoch=node.qc.cluster.brokers[2].epoch)

    def cpu_us_per_op(n: int = 20000) -> float:
        began = time.thread_time()
        for _ in range(n):
            node.handle(request, 0)
        return (time.thread_time() - began) / n * 1e6

    with_count = Manager.replay
    ratios, before, after = [], [], []
    try:
        for i in range(rounds):
            sides = [("after", with_count), ("before", replay_without_count)]
            got = {}
            for side, replay in (sides if i % 2 == 0 else sides[::-1]):
                Manager.replay = replay  # type: ignore[method-assign]
                got[side] = cpu_us_per_op()
            before.append(got["before"])
            after.append(got["after"])
            ratios.append(got["after"] / got["before"])
    finally:
        Manager.replay = with_count  # type: ignore[method-assign]
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(f"AllocateProducerIds handle+apply, CPU us/op: without the block count "
          f"{statistics.median(before):.3f}, with it {statistics.median(after):.3f}; per-round "
          f"ratio median {statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f}, "
          f"{rounds} rounds)")
    n = 1_000_000
    timings = Timings()
    observe = timeit.timeit("observe(0.0001, 1.0)", globals={"observe": timings.observe},
                            number=n) / n * 1e9
    count = timeit.timeit("c[0] += 1\nb = 0.0 if c[0] & 7 else 1.0", globals={"c": [0]},
                          number=n) / n * 1e9
    print(f"Timings.observe (once per commit round or drain pass): {observe:.0f} ns")
    print(f"dispatch's count and sample test (per request): {count:.0f} ns")


if __name__ == "__main__":
    main()
