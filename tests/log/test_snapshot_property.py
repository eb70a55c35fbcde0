"""Property: snapshot + suffix replay gives exactly the state of a full replay.

Generated histories of thousands of operations (broker registrations, fencing, unregistering,
producer-ID blocks, feature levels, topics, no-ops) are written through a lone voter's own road
(its controller scripted to answer each request with the history's next records), which
commits them, snapshots its committed image by the byte policy and trims the log. A restart
(newest snapshot + the log after it) must describe the same state as replaying every record
from offset 0, and as the live controller that applied them.
"""

from __future__ import annotations

import random
import tempfile
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller import replay
from kraftpy.controller.host import Deferred
from kraftpy.controller.log.storage import MetadataStorage
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord
from kraftpy.protocol.records.no_op_record import NoOpRecord
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from kraftpy.protocol.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from kraftpy.protocol.records.unregister_broker_record import UnregisterBrokerRecord
from support.lone_quorum import open_lone, settle, start_stepped

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def make_ops(seed: int, length: int) -> list[tuple[int, int]]:
    """A history drawn from a seed: op codes with seed-dependent weights, and their argument."""
    rng = random.Random(seed)
    weights = [rng.random() + 0.05 for _ in range(8)]
    codes = rng.choices(range(8), weights=weights, k=length)
    return [(code, rng.randrange(5)) for code in codes]


class History:
    """Turns op codes into records that make sense for the state so far."""

    def __init__(self) -> None:
        self.brokers: dict[int, int] = {}  # id -> epoch
        self.fenced: dict[int, bool] = {}
        self.next_pid = 0
        self.topics = 0

    def records(self, code: int, arg: int, offset: int) -> list[tuple[object, int]]:
        if code == 0 or (code in (1, 2, 3) and arg not in self.brokers):
            self.brokers[arg] = offset
            self.fenced[arg] = True
            return [
                (
                    RegisterBrokerRecord(
                        broker_id=arg,
                        broker_epoch=offset,
                        incarnation_id=uuid.UUID(int=offset + 1),
                        end_points=[
                            BrokerEndpoint(
                                name="PLAINTEXT", host=f"h{arg}", port=9092, security_protocol=0
                            )
                        ],
                        features=[],
                        rack=None,
                        fenced=True,
                        log_dirs=[uuid.UUID(int=arg + 7)],
                    ),
                    3,
                )
            ]
        if code in (1, 2):
            fence = code == 1
            if self.fenced[arg] == fence:
                return [(NoOpRecord(), 0)]
            self.fenced[arg] = fence
            return [
                (
                    BrokerRegistrationChangeRecord(
                        broker_id=arg, broker_epoch=self.brokers[arg], fenced=1 if fence else -1
                    ),
                    0,
                )
            ]
        if code == 3:
            epoch = self.brokers.pop(arg)
            return [(UnregisterBrokerRecord(broker_id=arg, broker_epoch=epoch), 0)]
        if code == 4:
            self.next_pid += 1000
            return [
                (
                    ProducerIdsRecord(
                        broker_id=arg, broker_epoch=-1, next_producer_id=self.next_pid
                    ),
                    0,
                )
            ]
        if code == 5:
            return [(FeatureLevelRecord(name="transaction.version", feature_level=arg % 3), 0)]
        if code == 6:
            self.topics += 1
            topic_id = uuid.UUID(int=self.topics)
            return [(TopicRecord(name=f"t{self.topics}", topic_id=topic_id), 0)] + [
                (
                    PartitionRecord(
                        partition_id=p,
                        topic_id=topic_id,
                        replicas=[1],
                        isr=[1],
                        leader=1,
                        leader_epoch=0,
                        partition_epoch=0,
                    ),
                    0,
                )
                for p in range(arg + 1)
            ]
        return [(NoOpRecord(), 0)]


def _controller() -> QuorumController:
    return QuorumController(ControllerSettings(cluster_id=CLUSTER, node_id=1))


def _image(controller: QuorumController) -> dict:
    image = controller.describe()
    # The features epoch is the offset where the features were last read from: the snapshot's
    # end when loaded from one, as in Kafka, so it differs from a whole replay's.
    image.pop("features_epoch", None)
    for key in ("high_watermark", "leader_epoch", "active"):  # the live node's, not state
        image.pop(key, None)
    for broker in image.get("brokers", []):
        broker.pop("last_contact_ms", None)  # a session clock, not replayed state
    return image


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    length=st.integers(1000, 3000),
    snapshot_bytes=st.integers(2_000, 40_000),
)
def test_snapshot_plus_suffix_equals_full_replay(
    seed: int, length: int, snapshot_bytes: int
) -> None:
    ops = make_ops(seed, length)
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "data"
        # A controller only (no producer-id block of its own), no NoOps: the history's records
        # are the only ones after the bootstrap.
        node = open_lone(d, {"process.roles": "controller",
                             "listeners": "CONTROLLER://127.0.0.1:0",
                             "metadata.log.segment.bytes": "8192",
                             "metadata.log.max.record.bytes.between.snapshots":
                                 str(snapshot_bytes),
                             "metadata.log.max.snapshot.interval.ms": "0",
                             "metadata.max.idle.interval.ms": "0"})
        live = node.controller
        everything: list[tuple[bytes, int]] = []  # every record applied, at its offset
        apply = live.apply

        def recording(result: ControllerResult, *, offset: int, txn_offset: int) -> None:
            everything.extend((encode_metadata_record(r, v), offset + i)
                              for i, (r, v) in enumerate(result.records))
            apply(result, offset=offset, txn_offset=txn_offset)

        live.apply = recording  # type: ignore[method-assign]
        start_stepped(node)  # elected, the bootstrap committed
        live.handle = lambda request, version, **kwargs: ControllerResult(  # type: ignore
            response=Answer(), records=request)
        history = History()
        for at in range(0, len(ops), 50):  # 50 requests, then their commit (group commit)
            answers = [node.host.handle(history.records(code, arg, node.raft.next_offset), 0)
                       for code, arg in ops[at:at + 50]]
            settle(node)
            assert all(a.done for a in answers if isinstance(a, Deferred))
        snapshots_taken = node.storage.metadata.log_start_offset > 0
        node.storage.close()

        full = _controller()
        for value, offset in everything:
            record, version = decode_metadata_record(value)
            full.replay(record, version, offset)

        again = MetadataStorage.open(d, node_id=1)
        restarted = _controller()
        _, snapshot_records, log_records = replay.replay_snapshot_and_log(
            [restarted], again.snapshot, again.metadata, None)
        again.close()
        assert again.snapshot is not None or not snapshots_taken
        assert snapshot_records + log_records <= len(everything)
        assert _image(restarted) == _image(full) == _image(live)


class Answer:
    """What the scripted controller answers (any request type would do)."""

    API_KEY = 57
    error_code = 0

