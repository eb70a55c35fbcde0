"""Records kraftpy does not act on still survive its snapshots, as Kafka's image keeps them."""

from __future__ import annotations

from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.records.client_quota_record import ClientQuotaRecord, EntityData
from kraftpy.protocol.records.delegation_token_record import DelegationTokenRecord
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord
from kraftpy.protocol.records.remove_delegation_token_record import RemoveDelegationTokenRecord
from kraftpy.protocol.records.remove_user_scram_credential_record import (
    RemoveUserScramCredentialRecord,
)
from kraftpy.protocol.records.user_scram_credential_record import UserScramCredentialRecord
from support.controller_harness import settings


def quota(user: str, key: str, value: float, remove: bool = False) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=[EntityData(entity_type="user", entity_name=user)],
                             key=key, value=value, remove=remove)


def scram(user: str, mechanism: int) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(name=user, mechanism=mechanism, salt=b"s" * 16,
                                     stored_key=b"k" * 32, server_key=b"v" * 32,
                                     iterations=4096)


def token(token_id: str) -> DelegationTokenRecord:
    return DelegationTokenRecord(owner="User:alice", requester="User:alice", renewers=[],
                                 issue_timestamp=1, max_timestamp=2, expiration_timestamp=3,
                                 token_id=token_id)


HISTORY = [
    FeatureLevelRecord(name="metadata.version", feature_level=27),
    quota("alice", "producer_byte_rate", 1024.0),
    quota("alice", "consumer_byte_rate", 2048.0),
    quota("bob", "producer_byte_rate", 10.0),
    quota("alice", "producer_byte_rate", 4096.0),  # a later value replaces the earlier
    quota("bob", "producer_byte_rate", 0.0, remove=True),
    scram("alice", 1),
    scram("alice", 2),
    RemoveUserScramCredentialRecord(name="alice", mechanism=1),
    token("t1"),
    token("t2"),
    RemoveDelegationTokenRecord(token_id="t1"),
]


def replayed(records: list) -> QuorumController:
    qc = QuorumController(settings())
    for offset, record in enumerate(records):
        frame = encode_metadata_record(record, 0)
        decoded, version = decode_metadata_record(frame)
        qc.replay(decoded, version, offset)
    return qc


def test_snapshot_keeps_the_live_quotas_credentials_and_tokens() -> None:
    records = [r for r, _ in replayed(HISTORY).snapshot_records()]
    quotas = [(r.entity[0].entity_name, r.key, r.value) for r in records
              if isinstance(r, ClientQuotaRecord)]
    assert sorted(quotas) == [("alice", "consumer_byte_rate", 2048.0),
                              ("alice", "producer_byte_rate", 4096.0)]
    assert [(r.name, r.mechanism) for r in records
            if isinstance(r, UserScramCredentialRecord)] == [("alice", 2)]
    assert [r.token_id for r in records if isinstance(r, DelegationTokenRecord)] == ["t2"]


def test_kafka_image_order_and_a_snapshot_round_trip() -> None:
    snapshot = replayed(HISTORY).snapshot_records()
    kinds = [type(r).__name__ for r, _ in snapshot]
    # features first; quotas before credentials; SCRAM before delegation tokens
    assert kinds[0] == "FeatureLevelRecord"
    assert kinds.index("ClientQuotaRecord") < kinds.index("UserScramCredentialRecord") \
        < kinds.index("DelegationTokenRecord")
    again = replayed([r for r, _ in snapshot]).snapshot_records()
    assert [r.encode(v) for r, v in again] == [r.encode(v) for r, v in snapshot]
