"""A broker event's leader and ISR moves, made a bounded part per controller event.

Why: a broker that is in the ISR of half of a million partitions is fenced, or shuts down,
and every one of them changes. Kafka's controller makes all those records in one event (and
writes them in batches of 10,000, its maxRecordsPerBatch); made here in one event, they would
hold the event loop for seconds, and every heartbeat, fetch and ApiVersions would wait (long
enough, on a busy machine, for other brokers' sessions to expire). So the moves are a job:
the partitions it concerns are the ones the index holds when the event happens (Kafka's
iterator over them), and each controller event (the request or timer tick that began it,
then one tick after another) makes the moves of as many of them as `WORK_PER_EVENT` allows
(at most 3,000, or 1,000 changes built), each from the partition's state at that moment,
until none is left. Records that open the event
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

# The work one controller event may do, counted per partition: 1 for a change given the
# record of another partition in the same state, BUILD_COST for one built (MoveContext);
# 4-5 us and 11-12 us of CPU with its encoding and replay. A part is at most 1,500 partitions
# or 500 built changes: some 6-8 ms on the loop, and its commit (the image's replay, the
# brokers' fetches) about as much again, so what waits behind it stays well under 50 ms on a
# busy machine too (with 3,000, a fence of a million partitions showed an ApiVersions p99 of
# 55-60 ms; with 1,500, 32 ms).
WORK_PER_EVENT = 1500
BUILD_COST = 3


class Walk:
    """The partitions an index held when a walk began (frozen bitmaps), handed out in
    order, each as it is now; ones whose topic is gone since are skipped."""

    __slots__ = ("_ids", "_topics", "_last", "done")

    def __init__(self, replication: ReplicationControlManager, members: Frozen) -> None:
        self._ids: Iterator[tuple[Topic, int]] = frozen_ids(members)
        self._topics = replication.topics
        self._last: tuple[Topic, int] | None = None
        self.done = False

    def next(self) -> Partition | None:
        """The next partition (None, and `done`, once none is left)."""
        topics = self._topics
        for topic, partition_id in self._ids:
            if topics.get(topic.topic_id) is not topic:
                continue  # deleted meanwhile
            part = topic.partitions.get(partition_id)
            if part is not None:
                self._last = (topic, partition_id)
                return part
        self.done = True
        return None

    def put_back(self) -> None:
        """The partition `next` gave last comes first again."""
        self._ids = chain((self._last,), self._ids)
        self.done = False

    def take(self, limit: int) -> list[Partition]:
        """Up to `limit` partitions; `done` once none is left."""
        out: list[Partition] = []
        while len(out) < limit:
            part = self.next()
            if part is None:
                return out
            out.append(part)
        if self.next() is not None:  # is any left?
            self.put_back()
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

    def take(self, work: int) -> list[tuple[Any, int]]:
        """The next part's records, at most `work` of it (WORK_PER_EVENT): the opening ones
        first, the closing ones with the last."""
        records = self.open()
        moves = self._replication.moves_context(**self._args)
        walk, spent, kept = self._walk, 0, []
        while True:
            part = walk.next()
            if part is None:
                break
            state = moves.state(part)
            cost = 1 if state in moves.built else BUILD_COST
            if spent and spent + cost > work:
                walk.put_back()
                break
            spent += cost
            kept.append(part)  # alive for the event: `state` holds its lists by identity
            record = moves.change(part, state)
            if record is not None:
                records.append((record, moves.version))
        if walk.done:
            self.done = True
            records += self._closing
        return records


class MoveQueue:
    """The leader moves still to be made, oldest first."""

    __slots__ = ("_jobs", "limit")

    def __init__(self, limit: int = WORK_PER_EVENT) -> None:
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
