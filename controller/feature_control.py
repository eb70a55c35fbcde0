"""FeatureControlManager: finalized feature levels (FeatureLevelRecord) and what we support.

metadata.version decides which record versions we write, so every writer asks here. The
levels only change by replay; bootstrap_records() is how an empty log gets its first levels.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kraftpy.controller.settings import MV_3_4_IV0, MV_3_6_IV1, MV_3_7_IV2, MV_4_1_IV1
from kraftpy.protocol.records.begin_transaction_record import BeginTransactionRecord
from kraftpy.protocol.records.end_transaction_record import EndTransactionRecord
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord

METADATA_VERSION = "metadata.version"
ELR_VERSION = "eligible.leader.replicas.version"

# The feature ranges this node supports: (min, max) levels. kraftpy runs a static single-voter
# quorum (kraft.version 0) and none of the KIP-890/848 coordinator protocols (level 0 only).
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = {
    METADATA_VERSION: (7, MV_4_1_IV1),
    "kraft.version": (0, 0),
    "transaction.version": (0, 0),
    "group.version": (0, 0),
}


class FeatureControlManager:
    def __init__(self) -> None:
        self.finalized: dict[str, int] = {}

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version level; 0 before the bootstrap records are replayed."""
        return self.finalized.get(METADATA_VERSION, 0)

    def replay(self, record: FeatureLevelRecord) -> None:
        if record.feature_level == 0:
            self.finalized.pop(record.name, None)
        else:
            self.finalized[record.name] = record.feature_level

    def snapshot_records(self) -> list[tuple[Any, int]]:
        names = sorted(self.finalized, key=lambda n: (n != METADATA_VERSION, n))
        return [(FeatureLevelRecord(name=n, feature_level=self.finalized[n]), 0) for n in names]

    # --- what the finalized levels decide ------------------------------------------------

    def register_broker_record_version(self) -> int:
        mv = self.metadata_version
        if mv >= MV_3_7_IV2:
            return 3
        if mv >= MV_3_4_IV0:
            return 2
        return 1

    def partition_record_version(self) -> int:
        """2 with eligible leader replicas (KIP-966) finalized, 1 with directories, else 0."""
        if self.finalized.get(ELR_VERSION, 0) >= 1:
            return 2
        return 1 if self.metadata_version >= MV_3_7_IV2 else 0

    def log_dirs_required(self) -> bool:
        return self.metadata_version >= MV_3_7_IV2

    def check_broker_features(self, features: Iterable[Any]) -> str | None:
        """Why a broker with these supported ranges may not join, or None when it may.

        Every finalized feature must lie in the broker's range; a missing metadata.version
        range counts as [1, 1] and any other missing feature as [0, 0], as Kafka does.
        """
        ranges = {f.name: (f.min_supported_version, f.max_supported_version) for f in features}
        for name, level in sorted(self.finalized.items()):
            default = (1, 1) if name == METADATA_VERSION else (0, 0)
            lo, hi = ranges.get(name, default)
            if not lo <= level <= hi:
                return (f"Unable to register because the broker does not support finalized "
                        f"version {level} of {name}. The broker wants a version between "
                        f"{lo} and {hi}, inclusive.")
        return None


def bootstrap_records(metadata_version: int,
                      features: Mapping[str, int]) -> list[tuple[Any, int]]:
    """The first records of an empty log: a KIP-868 transaction finalizing the levels."""
    lo, hi = SUPPORTED_FEATURES[METADATA_VERSION]
    if not lo <= metadata_version <= hi:
        raise ValueError(f"metadata.version {metadata_version} is outside the supported "
                         f"range {lo}-{hi}")
    levels = [(METADATA_VERSION, metadata_version)]
    for name, level in sorted(features.items()):
        if name == METADATA_VERSION or level == 0:
            continue
        lo, hi = SUPPORTED_FEATURES.get(name, (0, 0))
        if not lo <= level <= hi:
            raise ValueError(f"feature {name} level {level} is not supported ({lo}-{hi})")
        levels.append((name, level))
    records = [(FeatureLevelRecord(name=n, feature_level=v), 0) for n, v in levels]
    if metadata_version < MV_3_6_IV1:  # no metadata transactions before 3.6-IV1
        return records
    return [(BeginTransactionRecord(name="Bootstrap records"), 0), *records,
            (EndTransactionRecord(), 0)]
