"""ControllerResult: what one controller operation produces, before any of it is applied.

A command never changes state; it returns the records that would, and the response to send
once they are durable. The caller appends the records, replays them, and releases the
response by the rules below, so the same replay serves live operation, recovery and
snapshot loading.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_new = object.__new__
_NOTHING: tuple[Any, ...] = ()


@dataclass(slots=True, init=False)
class ControllerResult:
    """The outcome of handle() or tick().

    - `response`: the typed response message (None for tick()).
    - `records`: `(metadata record, version)` pairs, never split across batches (atomic; other
      operations' records may share the batch), the first at the `next_offset` given.
    - `txn_records`: `transaction_control.TxnRecord`s (partition, TransactionLogKey,
      TransactionLogValue | None, value version) for `__transaction_state` (None: tombstone).
    - `respond_before_commit`: the response depends on nothing uncommitted and may be sent
      at once. Otherwise it waits until every record of this result, and everything
      appended before it, is fsynced.
    - `events`: one human-readable line per state change worth logging at INFO: a str, or a
      `(format, *args)` tuple, %-formatted only if the line is logged (the hot paths: the
      formatting is a fifth of a block allocation's cost, wasted where INFO is off).
    """

    response: Any = None
    records: list[tuple[Any, int]] = field(default_factory=list)
    txn_records: list[Any] = field(default_factory=list)
    respond_before_commit: bool = False
    events: list[Any] = field(default_factory=list)

    def __init__(self, response: Any = None, records: list[tuple[Any, int]] | None = None,
                 txn_records: list[Any] | None = None,
                 respond_before_commit: bool = False, events: list[Any] | None = None) -> None:
        # Written out: the generated __init__ calls a default factory per empty list, and
        # every write goes through here (about half the cost).
        self.response = response
        self.records = [] if records is None else records
        self.txn_records = [] if txn_records is None else txn_records
        self.respond_before_commit = respond_before_commit
        self.events = [] if events is None else events

    @staticmethod
    def reply(response: Any) -> ControllerResult:
        """A response that changes nothing and can go out at once."""
        # Built field by field: the most common result, and the generated __init__ with its
        # default factories costs about twice as much.
        result = _new(ControllerResult)
        result.response = response
        result.records = []
        result.txn_records = []
        result.respond_before_commit = True
        result.events = []
        return result

    @staticmethod
    def answer(response: Any) -> ControllerResult:
        """`reply` for a result nobody adds to (the idempotent InitProducerId path): empty
        tuples stand for the lists, so it allocates nothing else. Never merge into it."""
        result = _new(ControllerResult)
        result.response = response
        result.records = result.txn_records = result.events = _NOTHING  # type: ignore[assignment]
        result.respond_before_commit = True
        return result

    def event_lines(self) -> list[str]:
        """`events` as the lines logged."""
        return [line[0] % line[1:] if type(line) is tuple else line for line in self.events]

    def merge(self, other: ControllerResult) -> ControllerResult:
        """Append another result's records and events (same batch); keeps this response."""
        self.records.extend(other.records)
        self.txn_records.extend(other.txn_records)
        self.events.extend(other.events)
        return self
