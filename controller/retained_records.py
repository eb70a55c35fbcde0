"""State kraftpy keeps but does not act on: client quotas, SCRAM credentials, delegation tokens.

A Kafka-written log may hold these. kraftpy makes no decision with them, yet a snapshot must
rebuild the whole state the log describes, so each is kept by its identity exactly as the
latest record left it, and written back in Kafka's image order. Dropping them would lose a
user's data at the first snapshot.
"""

from __future__ import annotations

from typing import Any

CLIENT_QUOTA = 14
USER_SCRAM_CREDENTIAL = 11
REMOVE_USER_SCRAM_CREDENTIAL = 22
DELEGATION_TOKEN = 10
REMOVE_DELEGATION_TOKEN = 26
ZK_MIGRATION_STATE = 21

RECORD_TYPES = frozenset({
    CLIENT_QUOTA, USER_SCRAM_CREDENTIAL, REMOVE_USER_SCRAM_CREDENTIAL, DELEGATION_TOKEN,
    REMOVE_DELEGATION_TOKEN, ZK_MIGRATION_STATE,
})


class RetainedRecords:
    def __init__(self) -> None:
        # (entity, quota key) -> ClientQuotaRecord; entity = sorted (type, name) pairs
        self.client_quotas: dict[tuple[tuple[tuple[str, str | None], ...], str], Any] = {}
        self.scram: dict[tuple[str, int], Any] = {}  # (user, mechanism) -> record
        self.delegation_tokens: dict[str, Any] = {}  # token id -> record
        self.zk_migration_state: Any = None

    def replay(self, record: Any) -> None:
        kind = record.API_KEY
        if kind == CLIENT_QUOTA:
            entity = tuple(sorted((e.entity_type, e.entity_name) for e in record.entity))
            if record.remove:
                self.client_quotas.pop((entity, record.key), None)
            else:
                self.client_quotas[(entity, record.key)] = record
        elif kind == USER_SCRAM_CREDENTIAL:
            self.scram[(record.name, record.mechanism)] = record
        elif kind == REMOVE_USER_SCRAM_CREDENTIAL:
            self.scram.pop((record.name, record.mechanism), None)
        elif kind == DELEGATION_TOKEN:
            self.delegation_tokens[record.token_id] = record
        elif kind == REMOVE_DELEGATION_TOKEN:
            self.delegation_tokens.pop(record.token_id, None)
        elif kind == ZK_MIGRATION_STATE:
            self.zk_migration_state = record

    def feature_records(self) -> list[tuple[Any, int]]:
        """Written with the features, where Kafka's image keeps the migration state."""
        return [(self.zk_migration_state, 0)] if self.zk_migration_state is not None else []

    def quota_records(self) -> list[tuple[Any, int]]:
        return [(r, 0) for r in self.client_quotas.values()]

    def credential_records(self) -> list[tuple[Any, int]]:
        """SCRAM credentials, then delegation tokens: the tail of Kafka's image order."""
        return [(r, 0) for r in self.scram.values()] + [
            (r, 0) for r in self.delegation_tokens.values()]
