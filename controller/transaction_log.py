"""The transaction log's room: a lone voter's `__transaction_state`, with one commit rule.

Kafka keeps transaction state in the `__transaction_state` topic on brokers; kraftpy, which
answers transactional InitProducerId itself, keeps it beside the metadata log in Kafka's own
partition directories (`log/txn_state.py`). It is not replicated, so only a lone voter (whose
disk is the majority) keeps one. The rule: a record of it is committed once it is fsynced.
The host appends a result's transaction records here before its metadata records, and an
answer waits until both logs have committed what it wrote. Fsyncs come in rounds of their own
(group commit: one round covers everything appended before it began), beside the metadata
log's, so neither waits for the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import trio
from kraftpy.controller.log.txn_state import TransactionStateLog, TxnFlush
from kraftpy.controller.metrics_stats import Timings

log = logging.getLogger("kraftpy.txn")


class TransactionLog:
    """Appends, fsync rounds and the durable count of one `TransactionStateLog`."""

    def __init__(self, files: TransactionStateLog,
                 on_durable: Callable[[int], None] = lambda count: None) -> None:
        self.files = files
        self.on_durable = on_durable
        self.durable = files.durable  # records below this count are on disk
        self.fsync_timings = Timings()
        self._wake = trio.Event()

    @property
    def end(self) -> int:
        """The count the next record gets (over every partition)."""
        return self.files.log_end_offset

    def append(self, txn_records: list[Any], now_ms: int) -> int:
        """A result's records (each partition's in one batch); the count of the first."""
        first = self.files.accumulate(txn_records, now_ms)
        self._wake.set()
        return first

    def begin_round(self) -> TxnFlush:
        """Write what is appended; the round's fsync may then run in any thread."""
        return self.files.begin_flush()

    def complete_round(self, flush: TxnFlush) -> None:
        flush.release()
        durable = self.files.complete_flush(flush)
        if durable > self.durable:
            self.durable = durable
            self.on_durable(durable)

    def flush(self) -> None:
        """One round, here and now (startup, tests)."""
        flush = self.begin_round()
        flush.fsync()
        self.complete_round(flush)

    async def run(self, fail: Callable[[BaseException], None]) -> None:
        """Fsync rounds until cancelled; a failed one stops the node (`fail`)."""
        while True:
            if self.durable >= self.end:
                self._wake = trio.Event()
                if self.durable >= self.end:
                    await self._wake.wait()
                continue
            began = time.perf_counter()
            flush = self.begin_round()
            try:
                await trio.to_thread.run_sync(flush.fsync)
            except OSError as exc:
                flush.release()
                fail(OSError(exc.errno, f"fsync of the transaction log failed: {exc}"))
                return
            self.fsync_timings.observe(time.perf_counter() - began, began)
            self.complete_round(flush)
