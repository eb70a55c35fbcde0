"""A broker event's leader and ISR moves, made a bounded number of partitions per event.

Why: a broker that is in the ISR of half of a million partitions is fenced, or shuts down,
and every one of them changes. Kafka's controller makes all those records in one event (and
writes them in batches of 10,000, its maxRecordsPerBatch); made here in one event, they would
hold the event loop for seconds, and every heartbeat, fetch and ApiVersions would wait (long
enough, on a busy machine, for other brokers' sessions to expire). So the moves are a job:
the partitions it concerns are the ones the index holds when the event happens (Kafka's
iterator over them), and each controller event (the request or timer tick that began it,
then one tick after another) makes the moves of at most `PARTITIONS_PER_EVENT` of them, each
from the partition's state at that moment, until none is left. Records that open the event
(an unfence's or a controlled shutdown's BrokerRegistrationChangeRecord) come with the first
part, records that close it (a fence's) with the last. With nothing else in between, the
records are the ones one event would make, in the same order; between two parts every other
request is answered.

While a fence's moves are under way the broker counts as fenced for everything else
(`ClusterControlManager.leaving`): it is elected nowhere, joins no ISR, its heartbeats are
answered as fenced and its session no longer expires, as in Kafka from the event on; its
registration says so once the closing record is written. Jobs run one after another, oldest
first; a new registration or an unregistration of the broker drops its job (that request's
own records take the broker out of what is left).

The periodic elections walk their index the same way (`Walk`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

from kraftpy.controller.brokers_to_isrs import NO_LEADER, Frozen, frozen_ids

if TYPE_CHECKING:
    from kraftpy.controller.replication_control import (
        Partition,
        ReplicationControlManager,
        Topic,
    )

# Partitions one controller event looks at: about 15 us of CPU each (the change, its encoding
# and its replay), so a part holds the loop some 15 ms, twice that on a busy machine: what
# waits behind it stays well under 50 ms.
PARTITIONS_PER_EVENT = 1000


class Walk:
    """The partitions an index held when a walk began (frozen bitmaps), handed out in
    order, each as it is now; ones whose topic is gone since are skipped."""

    __slots__ = ("_ids", "_topics", "done")

    def __init__(self, replication: ReplicationControlManager, members: Frozen) -> None:
        self._ids: Iterator[tuple[Topic, int]] = frozen_ids(members)
        self._topics = replication.topics
        self.done = False

    def take(self, limit: int) -> list[Partition]:
        """Up to `limit` partitions; `done` once none is left."""
        out: list[Partition] = []
        topics = self._topics
        for topic, partition_id in self._ids:
            if topics.get(topic.topic_id) is not topic:
                continue  # deleted meanwhile
            part = topic.partitions.get(partition_id)
            if part is None:
                continue
            if len(out) == limit:  # one too many: kept for the next part
                self._ids = chain(((topic, partition_id),), self._ids)
                return out
            out.append(part)
        self.done = True
        return out


class LeaderMoves:
    """One broker event's moves (`generate_leader_and_isr_updates` with `remove`, `add`,
    `unclean`) over the partitions of `members`, with the records that open and close it."""

    __slots__ = ("broker_id", "broker_epoch", "fencing", "_walk", "_replication", "_args",
                 "_opening", "_closing", "done")

    def __init__(self, replication: ReplicationControlManager, members: Frozen, *,
                 broker_id: int, broker_epoch: int, remove: int = NO_LEADER,
                 add: int = NO_LEADER, unclean: int = NO_LEADER,
                 opening: list[tuple[Any, int]] | None = None,
                 closing: list[tuple[Any, int]] | None = None, fencing: Any = None) -> None:
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.fencing = fencing  # the state a fence job leaves the broker in (None: no fence)
        self._walk = Walk(replication, members)
        self._replication = replication
        self._args = {"remove": remove, "add": add, "unclean": unclean}
        self._opening = opening or []
        self._closing = closing or []
        self.done = False

    def open(self) -> list[tuple[Any, int]]:
        """The opening records (once)."""
        records, self._opening = self._opening, []
        return records

    def take(self, limit: int) -> list[tuple[Any, int]]:
        """The next part's records: the opening ones first, the closing ones with the last."""
        records = self.open()
        parts = self._walk.take(limit)
        records += self._replication.generate_leader_and_isr_updates(parts, **self._args)
        if self._walk.done:
            self.done = True
            records += self._closing
        return records


class MoveQueue:
    """The leader moves still to be made, oldest first."""

    __slots__ = ("_jobs", "limit")

    def __init__(self, limit: int = PARTITIONS_PER_EVENT) -> None:
        self._jobs: deque[LeaderMoves] = deque()
        self.limit = limit

    def __bool__(self) -> bool:
        return bool(self._jobs)

    def start(self, job: LeaderMoves) -> list[tuple[Any, int]]:
        """The job's first part (queued if more is left); while older jobs are under way,
        only its opening records, and its moves wait their turn."""
        if self._jobs:
            self._jobs.append(job)
            return job.open()
        records = job.take(self.limit)
        if not job.done:
            self._jobs.append(job)
        return records

    def step(self) -> tuple[LeaderMoves | None, list[tuple[Any, int]]]:
        """The next part of the oldest job (and the job, to see whether it is done)."""
        if not self._jobs:
            return None, []
        job = self._jobs[0]
        records = job.take(self.limit)
        if job.done:
            self._jobs.popleft()
        return job, records

    def fencing(self, broker_id: int) -> Any:
        """The state a queued fence leaves the broker in, or None."""
        for job in self._jobs:
            if job.broker_id == broker_id and job.fencing is not None:
                return job.fencing
        return None

    def drop(self, broker_id: int) -> None:
        """Forget the broker's jobs (a new registration or an unregistration replaces them)."""
        self._jobs = deque(job for job in self._jobs if job.broker_id != broker_id)
