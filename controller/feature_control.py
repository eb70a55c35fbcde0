"""FeatureControlManager: Kafka 4.1's features, their levels, and what each level changes.

metadata.version and the other finalized features decide which record versions we write
(RegisterBrokerRecord, PartitionRecord, PartitionChangeRecord, TransactionLogValue), whether
the bootstrap is a metadata transaction, and whether ELR asks for a cluster-level
min.insync.replicas. The levels only change by replay; `bootstrap_records` is how an empty log
gets its first levels, `update_features` is UpdateFeatures (KIP-584/778) with Kafka's checks.

The tables below are Kafka 4.1's (`Feature`, `MetadataVersion` and the `*Version` enums of
kafka-server-common 4.1.0): each feature level's bootstrap metadata.version (the release
whose format defaults to it) and its dependencies. kraftpy supports exactly the production
ranges a Kafka 4.1 controller supports; unstable levels (metadata.version 28-29,
streams.version 1) are refused as Kafka refuses them without `unstable.feature.versions.enable`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kraftpy.controller.settings import MV_3_4_IV0, MV_3_6_IV1, MV_3_7_IV2, MV_4_1_IV1
from kraftpy.protocol.records.begin_transaction_record import BeginTransactionRecord
from kraftpy.protocol.records.config_record import ConfigRecord
from kraftpy.protocol.records.end_transaction_record import EndTransactionRecord
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELR_VERSION = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"

MIN_INSYNC_REPLICAS = "min.insync.replicas"
BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER; resource name "" is the cluster default

# MetadataVersion: feature level -> (version string, whether the metadata format changed).
METADATA_VERSIONS: Mapping[int, tuple[str, bool]] = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True),
    14: ("3.6-IV2", True), 15: ("3.7-IV0", True), 16: ("3.7-IV1", False),
    17: ("3.7-IV2", True), 18: ("3.7-IV3", False), 19: ("3.7-IV4", False),
    20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False),
    26: ("4.1-IV0", False), 27: ("4.1-IV1", False), 28: ("4.2-IV0", False),
    29: ("4.2-IV1", False),
}
MV_MINIMUM = 7
MV_LATEST_PRODUCTION = MV_4_1_IV1
MV_LATEST_TESTING = max(METADATA_VERSIONS)
MV_3_7_IV0 = 15  # controller registrations (KIP-919)
MV_4_0_IV1 = 23  # ELR records: PartitionRecord/PartitionChangeRecord v2


class FeatureError(ValueError):
    """A feature level that cannot be set; the message is Kafka's where Kafka has one."""


class UnsupportedFeatureLevel(FeatureError):
    """A finalized level (in a log, a snapshot or a bootstrap file) this node cannot run."""


@dataclass(frozen=True)
class FeatureLevel:
    level: int
    bootstrap_mv: int  # the metadata.version from which this level is the format default
    dependencies: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Feature:
    name: str
    levels: tuple[FeatureLevel, ...]
    latest_production: int

    def level(self, level: int, *, allow_unstable: bool = False) -> FeatureLevel:
        """Kafka's Feature.fromFeatureLevel: the level, or ValueError with Kafka's words."""
        for lv in self.levels:
            if lv.level == level and (allow_unstable or level <= self.latest_production):
                return lv
        raise FeatureError(f"No feature:{self.name} with feature level {level}")

    def default_level(self, metadata_version: int) -> int:
        """The level `kafka-storage format` picks at this metadata.version."""
        chosen = self.levels[0].level
        for lv in self.levels:
            if lv.bootstrap_mv > metadata_version:
                break
            chosen = lv.level
        return chosen


# Kafka's Feature.PRODUCTION_FEATURES, in its enum order.
FEATURES: Mapping[str, Feature] = {f.name: f for f in (
    Feature(KRAFT_VERSION, (FeatureLevel(0, MV_MINIMUM),
                            FeatureLevel(1, 21, {METADATA_VERSION: 21})), 1),
    Feature(TRANSACTION_VERSION, (FeatureLevel(0, MV_MINIMUM), FeatureLevel(1, 24),
                                  FeatureLevel(2, 24)), 2),
    Feature(GROUP_VERSION, (FeatureLevel(0, MV_MINIMUM), FeatureLevel(1, 22)), 1),
    Feature(ELR_VERSION, (FeatureLevel(0, MV_MINIMUM),
                          FeatureLevel(1, 26, {METADATA_VERSION: MV_4_0_IV1})), 1),
    Feature(SHARE_VERSION, (FeatureLevel(0, MV_MINIMUM), FeatureLevel(1, 28)), 1),
    Feature(STREAMS_VERSION, (FeatureLevel(0, MV_MINIMUM), FeatureLevel(1, 29)), 0),
)}


def _supported() -> dict[str, tuple[int, int]]:
    """QuorumFeatures.defaultSupportedFeatureMap(false): metadata.version up to the latest
    production level, and every feature whose latest production level is above 0."""
    out = {METADATA_VERSION: (MV_MINIMUM, MV_LATEST_PRODUCTION)}
    for f in FEATURES.values():
        if f.latest_production > 0:
            out[f.name] = (f.levels[0].level, f.latest_production)
    return out


# The feature ranges this node supports, (min, max): a Kafka 4.1 controller's, as ApiVersions
# advertises them and UpdateFeatures checks them.
SUPPORTED_FEATURES: Mapping[str, tuple[int, int]] = _supported()
# What a data dir may have finalized for kraftpy to run on it: the same. kraft.version 1 (a
# KIP-853 quorum whose voters are recorded in the log) runs with the recorded set; a node
# without controller.quorum.bootstrap.servers runs alone, so recovery refuses a set naming
# others there (`controller/raft/voters.py`).
RUNNABLE_FEATURES: Mapping[str, tuple[int, int]] = dict(SUPPORTED_FEATURES)


def metadata_version_name(level: int) -> str:
    return METADATA_VERSIONS.get(level, (str(level), False))[0]


def metadata_version_from_string(text: str) -> int:
    """Kafka's MetadataVersion.fromVersionString: "3.8", "3.8-IV0", "3.8.1" (the first two
    parts), a bare release meaning its latest production level."""
    parts = text.split(".")
    key = text if len(parts) <= 2 else ".".join(parts[:2])
    by_name = {name: lvl for lvl, (name, _) in METADATA_VERSIONS.items()}
    for lvl, (name, _) in METADATA_VERSIONS.items():
        if lvl <= MV_LATEST_PRODUCTION:
            by_name[name.split("-")[0]] = lvl  # later levels of a release win
    if key not in by_name:
        raise FeatureError(
            f"Version {text} is not a valid version. The minimum version is "
            f"{metadata_version_name(MV_MINIMUM)} and the maximum version is "
            f"{metadata_version_name(MV_LATEST_TESTING)}")
    return by_name[key]


def check_metadata_version_level(level: int) -> None:
    """Kafka's MetadataVersion.fromFeatureLevel: an existing level, else its words."""
    if level not in METADATA_VERSIONS:
        raise FeatureError(
            f"No MetadataVersion with feature level {level}. Valid feature levels are from "
            f"{MV_MINIMUM} to {MV_LATEST_TESTING}.")


def validate_dependencies(name: str, level: FeatureLevel, levels: Mapping[str, int]) -> None:
    """Kafka's Feature.validateVersion: every dependency met by `levels`."""
    mv = levels.get(METADATA_VERSION)
    if level.level >= 1 and (mv is None or mv < MV_MINIMUM):
        raise FeatureError(
            f"{name} could not be set to {level.level} because it depends on "
            f"metadata.version={MV_MINIMUM} ({metadata_version_name(MV_MINIMUM)})")
    for dep, needed in level.dependencies.items():
        have = levels.get(dep)
        if have is None or have < needed:
            raise FeatureError(f"{name} could not be set to {level.level} because it "
                               f"depends on {dep} level {needed}")


def format_levels(release_version: str | None, features: Mapping[str, int], *,
                  dynamic: bool = False) -> dict[str, int]:
    """What `kafka-storage format` finalizes (Kafka's Formatter): `--release-version`, the
    `--feature` levels, and every other production feature at its default for that
    metadata.version; dependencies checked. kraft.version is 1 for a KIP-853 quorum
    (`dynamic`: --standalone, --initial-controllers or --no-initial-controllers), else 0, and
    a `--feature kraft.version` that disagrees is refused, as Kafka's
    effectiveKRaftFeatureLevel does. Raises FeatureError with Kafka's words."""
    if METADATA_VERSION in features:
        if release_version is not None:
            raise FeatureError("Use --release-version instead of --feature "
                               f"{METADATA_VERSION}=X to avoid ambiguity.")
        mv = features[METADATA_VERSION]
        check_metadata_version_level(mv)
    elif release_version is not None:
        mv = metadata_version_from_string(release_version)
    else:
        mv = MV_LATEST_PRODUCTION
    if mv > MV_LATEST_PRODUCTION:
        raise FeatureError(f"{METADATA_VERSION} {metadata_version_name(mv)} is not yet stable.")
    for name in features:
        if name != METADATA_VERSION and name not in FEATURES:
            raise FeatureError(f"Unsupported feature: {name}. Supported features are: "
                               f"{', '.join(sorted(FEATURES))}")
    levels = dict(features)
    levels[METADATA_VERSION] = mv
    flags = "--standalone, --initial-controllers, or --no-initial-controllers"
    kraft = levels.get(KRAFT_VERSION)
    if kraft == 0 and dynamic:
        raise FeatureError(
            f"Cannot set {KRAFT_VERSION} to 0 if one of the flags {flags} is used. For dynamic "
            f"controllers support, try removing the --feature flag for {KRAFT_VERSION}.")
    if kraft is not None and kraft != 0 and not dynamic:
        raise FeatureError(
            f"Cannot set {KRAFT_VERSION} to {kraft} unless one of the flags {flags} is used. "
            f"For dynamic controllers support, try using one of {flags}.")
    levels[KRAFT_VERSION] = (1 if dynamic else 0) if kraft is None else kraft
    for f in FEATURES.values():
        levels.setdefault(f.name, f.default_level(mv))
    for name, level in sorted(levels.items()):
        if name != METADATA_VERSION:
            validate_dependencies(name, FEATURES[name].level(level), levels)
    return levels


def unsupported(levels: Mapping[str, int]) -> str | None:
    """The first finalized level this node cannot run, as one line, or None."""
    for name, level in sorted(levels.items(), key=lambda kv: (kv[0] != METADATA_VERSION, kv[0])):
        lo, hi = RUNNABLE_FEATURES.get(name, (0, 0))
        if name == KRAFT_VERSION and level > hi:
            return (f"feature {name} level {level} is not supported by kraftpy (a dynamic "
                    "KIP-853 quorum; kraftpy runs a static single-voter quorum, level 0)")
        if not lo <= level <= hi:
            what = (f"{name} level {level} ({metadata_version_name(level)})"
                    if name == METADATA_VERSION else f"{name} level {level}")
            return (f"feature {what} is not supported by kraftpy "
                    f"({'no level but 0' if hi == 0 else f'supported: {lo}-{hi}'})")
    return None


class FeatureControlManager:
    def __init__(self, *, node_id: int = 1, min_insync_replicas: int = 1) -> None:
        self.node_id = node_id
        self.min_insync_replicas = min_insync_replicas
        self.finalized: dict[str, int] = {}
        # The raft layer's kraft.version: kraftpy keeps a static quorum, so 0.
        self.kraft_version = 0
        # The offset at which the last change of finalized levels became whole (the end of
        # its metadata transaction): the controller's FinalizedFeaturesEpoch.
        self.epoch = -1
        self._in_transaction = False
        self._changed_in_transaction = False

    @property
    def metadata_version(self) -> int:
        """The finalized metadata.version level; 0 before the bootstrap records are replayed."""
        return self.finalized.get(METADATA_VERSION, 0)

    def replay(self, record: FeatureLevelRecord, offset: int = -1) -> None:
        """Apply a FeatureLevelRecord. A level outside our ranges means the log needs a
        controller we are not (Kafka's replay refuses it the same way)."""
        lo, hi = SUPPORTED_FEATURES.get(record.name, (0, 0))
        if record.name == KRAFT_VERSION:
            return  # kraft.version lives in the raft layer; such a record is ignored (KAFKA-18979)
        if not lo <= record.feature_level <= hi:
            raise UnsupportedFeatureLevel(
                unsupported({record.name: record.feature_level}) or record.name)
        if record.feature_level == 0 and record.name != METADATA_VERSION:
            self.finalized.pop(record.name, None)
        else:
            self.finalized[record.name] = record.feature_level
        if self._in_transaction:
            self._changed_in_transaction = True
        else:
            self.epoch = offset

    def replay_transaction_marker(self, begins: bool, offset: int) -> None:
        """Begin/End/AbortTransactionRecord: a metadata transaction's changes count at its end."""
        if begins:
            self._in_transaction, self._changed_in_transaction = True, False
            return
        if self._changed_in_transaction:
            self.epoch = offset
        self._in_transaction = self._changed_in_transaction = False

    def snapshot_records(self) -> list[tuple[Any, int]]:
        names = sorted(self.finalized, key=lambda n: (n != METADATA_VERSION, n))
        return [(FeatureLevelRecord(name=n, feature_level=self.finalized[n]), 0) for n in names]

    def levels(self) -> dict[str, int]:
        """Every finalized level, kraft.version included when above 0."""
        out = dict(self.finalized)
        if self.kraft_version:
            out[KRAFT_VERSION] = self.kraft_version
        return out

    # --- what the finalized levels decide ------------------------------------------------

    def register_broker_record_version(self) -> int:
        mv = self.metadata_version
        if mv >= MV_3_7_IV2:
            return 3
        if mv >= MV_3_4_IV0:
            return 2
        return 1

    def partition_record_version(self) -> int:
        """Kafka's MetadataVersion.partitionRecordVersion: 2 from 4.0-IV1 (ELR fields), 1
        from 3.7-IV2 (directories), else 0."""
        mv = self.metadata_version
        if mv >= MV_4_0_IV1:
            return 2
        return 1 if mv >= MV_3_7_IV2 else 0

    def partition_change_record_version(self) -> int:
        """Kafka's MetadataVersion.partitionChangeRecordVersion (the same steps)."""
        return self.partition_record_version()

    def transaction_log_value_version(self) -> int:
        """TransactionVersion.transactionLogValueVersion: flexible (1) from level 1."""
        return 1 if self.finalized.get(TRANSACTION_VERSION, 0) >= 1 else 0

    def metadata_transactions(self) -> bool:
        return self.metadata_version >= MV_3_6_IV1

    def elr_enabled(self) -> bool:
        return self.finalized.get(ELR_VERSION, 0) >= 1

    def log_dirs_required(self) -> bool:
        return self.metadata_version >= MV_3_7_IV2

    def check_broker_features(self, features: Iterable[Any]) -> str | None:
        """Why a broker with these supported ranges may not join, or None when it may.

        Every finalized feature must lie in the broker's range; a missing metadata.version
        range counts as [1, 1] and any other missing feature as [0, 0], as Kafka does.
        """
        ranges = {f.name: (f.min_supported_version, f.max_supported_version) for f in features}
        for name, level in sorted(self.levels().items()):
            default = (1, 1) if name == METADATA_VERSION else (0, 0)
            lo, hi = ranges.get(name, default)
            if not lo <= level <= hi:
                return (f"Unable to register because the broker does not support finalized "
                        f"version {level} of {name}. The broker wants a version between "
                        f"{lo} and {hi}, inclusive.")
        return None


def kraft_version_of(control: Iterable[tuple[int, bytes | None]]) -> int:
    """The kraft.version of a snapshot's control records (KRaftVersionRecord, type 5)."""
    from kraftpy.protocol.control_records import ControlType, decode_control_record

    level = 0
    for ctype, value in control:
        if ctype == ControlType.KRAFT_VERSION and value is not None:
            _, record = decode_control_record(
                int(ControlType.KRAFT_VERSION).to_bytes(4, "big"), value)
            level = record.k_raft_version
    return level


def bootstrap_records(metadata_version: int, features: Mapping[str, int], *,
                      min_insync_replicas: int = 1,
                      extra: Iterable[tuple[Any, int]] = ()) -> list[tuple[Any, int]]:
    """The first records of an empty log, as Kafka's ActivationRecordsGenerator writes them:
    metadata.version, the other levels above 0 by name (never kraft.version), the bootstrap
    file's other records (`extra`), a cluster-level min.insync.replicas when ELR is on; all
    in a KIP-868 metadata transaction from 3.6-IV1."""
    levels = {**features, METADATA_VERSION: metadata_version}
    reason = unsupported({n: v for n, v in levels.items() if n != KRAFT_VERSION})
    if reason:
        raise UnsupportedFeatureLevel(reason)
    records: list[tuple[Any, int]] = [
        (FeatureLevelRecord(name=METADATA_VERSION, feature_level=metadata_version), 0)]
    records += [(FeatureLevelRecord(name=n, feature_level=v), 0)
                for n, v in sorted(features.items())
                if n not in (METADATA_VERSION, KRAFT_VERSION) and v > 0]
    records += list(extra)
    if features.get(ELR_VERSION, 0) > 0:
        records.append((ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="",
                                     name=MIN_INSYNC_REPLICAS,
                                     value=str(min_insync_replicas)), 0))
    if metadata_version < MV_3_6_IV1:  # no metadata transactions before 3.6-IV1
        return records
    return [(BeginTransactionRecord(name="Bootstrap records"), 0), *records,
            (EndTransactionRecord(), 0)]
