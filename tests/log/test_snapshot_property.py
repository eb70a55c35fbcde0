"""Property: snapshot + suffix replay gives exactly the state of a full replay.

Generated histories of thousands of operations (broker registrations, fencing, unregistering,
producer-ID blocks, feature levels, topics, no-ops) are written through MetadataStorage, which
takes snapshots by its byte policy and trims the log. A restart (newest snapshot + the log after
it) must describe the same state as replaying every record from offset 0, and as the live
controller that applied them.
"""

from __future__ import annotations

import random
import tempfile
import uuid
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller.log.storage import MetadataStorage, SnapshotPolicy, format_storage
from kraftpy.controller.quorum_controller import QuorumController
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
        format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27)
        storage = MetadataStorage.open(
            d,
            node_id=1,
            segment_bytes=8192,
            policy=SnapshotPolicy(max_record_bytes=snapshot_bytes, interval_ms=0),
        )
        live = _controller()
        storage.replay_into(live)
        storage.begin_epoch(now_ms=1)
        history = History()
        everything: list[tuple[bytes, int]] = []
        for n, (code, arg) in enumerate(ops):
            records = history.records(code, arg, storage.metadata_end_offset())
            result = SimpleNamespace(records=records, txn_records=[])
            offset, _ = storage.append(result, 1000 + n)
            for i, (record, version) in enumerate(records):
                live.replay(record, version, offset + i)
                everything.append((encode_metadata_record(record, version), offset + i))
            storage.flush()
            storage.after_commit(live, 1000 + n)
        snapshots_taken = storage.metadata.log_start_offset > 0
        storage.close()

        full = _controller()
        for value, offset in everything:
            record, version = decode_metadata_record(value)
            full.replay(record, version, offset)

        again = MetadataStorage.open(d, node_id=1)
        restarted = _controller()
        stats = again.replay_into(restarted)
        again.close()
        assert stats.snapshot is not None or not snapshots_taken
        assert stats.snapshot_records + stats.log_records <= len(everything)
        assert _image(restarted) == _image(full) == _image(live)
