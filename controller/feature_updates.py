"""UpdateFeatures (KIP-584/778): Kafka 4.1's checks, the records, and the answer. Sans-IO.

Follows QuorumController.updateFeatures, ConfigurationControlManager.updateFeatures and
FeatureControlManager.updateFeature of Kafka 4.1: the updates are checked one by one (in the
order of Kafka's HashMap of them, so the first error reported is Kafka's), and the first
error fails the whole request with INVALID_UPDATE_VERSION and nothing written. Otherwise one
atomic batch: FeatureLevelRecords (and, when ELR is turned on, the cluster-level
min.insync.replicas ConfigRecord and the removal of broker-level ones). ValidateOnly writes
nothing. kraft.version lives in the raft layer: kraftpy keeps a static single-voter quorum,
so its level stays 0 and an upgrade to 1 is refused with a message saying so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kraftpy.controller.feature_control import (
    BROKER_RESOURCE,
    ELR_VERSION,
    FEATURES,
    KRAFT_VERSION,
    METADATA_VERSION,
    METADATA_VERSIONS,
    MIN_INSYNC_REPLICAS,
    MV_3_7_IV0,
    SUPPORTED_FEATURES,
    FeatureControlManager,
    FeatureError,
    validate_dependencies,
)
from kraftpy.controller.result import ControllerResult
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.update_features_response import (
    UpdatableFeatureResult,
    UpdateFeaturesResponse,
)
from kraftpy.protocol.records.config_record import ConfigRecord
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord
from kraftpy.protocol.records.no_op_record import NoOpRecord

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3

Ranges = Mapping[str, tuple[int, int]]


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode, as an unsigned 32-bit int."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(keys: Iterable[str], capacity: int = 16) -> list[str]:
    """The iteration order of a java.util.HashMap filled with `keys` in this order: by bucket
    (the spread hash modulo the table size), then by insertion. The table starts at
    `capacity` and doubles past three quarters full, as Java's does."""
    keys = list(dict.fromkeys(keys))
    while len(keys) > capacity * 3 // 4:
        capacity *= 2
    buckets = {k: (h ^ (h >> 16)) & (capacity - 1)
               for k in keys for h in (java_string_hash(k),)}
    return sorted(keys, key=lambda k: buckets[k])  # sorted() is stable: insertion order ties


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _reason_not_supported(what: str, level: int, lo: int, hi: int) -> str | None:
    """Kafka's QuorumFeatures.reasonNotSupported."""
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {_range_text(lo, hi)}"


def metadata_changed(a: int, b: int) -> bool:
    """Kafka's MetadataVersion.checkIfMetadataChanged between two levels."""
    if a == b:
        return False
    high, low = max(a, b), min(a, b)
    level = high
    while not METADATA_VERSIONS[level][1] and level != low and level - 1 in METADATA_VERSIONS:
        level -= 1
    return level != low


class FeatureUpdater:
    """One UpdateFeatures request against the replayed state; changes nothing itself."""

    def __init__(self, features: FeatureControlManager, *, brokers: Mapping[int, Ranges],
                 controllers: Mapping[int, Ranges], configs: Mapping[tuple[int, str, str], Any],
                 min_insync_replicas: int = 1) -> None:
        self.features = features
        self.brokers = brokers
        self.controllers = controllers
        self.configs = configs
        self.min_insync_replicas = min_insync_replicas

    def handle(self, request: Any, api_version: int) -> ControllerResult:
        if not self.features.metadata_version:  # not bootstrapped yet: retry shortly
            return ControllerResult.reply(UpdateFeaturesResponse(
                throttle_time_ms=0, error_code=ErrorCode.NOT_CONTROLLER,
                error_message="The controller has not finished its bootstrap.", results=[]))
        updates: dict[str, int] = {}
        types: dict[str, int] = {}
        for u in request.feature_updates:
            updates[u.feature] = u.max_version_level
            # Kafka's controller reads UpgradeType from the request data, whose v0 default is
            # 1 (upgrade): v0's AllowDowngrade is not consulted.
            types[u.feature] = u.upgrade_type
        proposed = dict(self.features.finalized)
        proposed[METADATA_VERSION] = self.features.metadata_version
        proposed.update(updates)
        records: list[tuple[Any, int]] = []
        for name in java_hash_map_order(updates):
            error = self._update_one(name, updates[name], types.get(name, UPGRADE), proposed,
                                     records)
            if error is not None:
                return ControllerResult.reply(UpdateFeaturesResponse(
                    throttle_time_ms=0, error_code=ErrorCode.INVALID_UPDATE_VERSION,
                    error_message="The update failed for all features since the following "
                                  f"feature had an error: {error}", results=[]))
        if request.validate_only:
            records = []
        elif updates.get(ELR_VERSION, 0) > 0:
            records = self._elr_safety_records() + records
        response = UpdateFeaturesResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                          error_message=None, results=[])
        if api_version <= 1:
            response.results = [UpdatableFeatureResult(feature=u.feature, error_code=0,
                                                       error_message="NONE")
                                for u in request.feature_updates]
        if not records:
            return ControllerResult.reply(response)
        changes = ", ".join(f"{r.name}={r.feature_level}" for r, _ in records
                            if isinstance(r, FeatureLevelRecord))
        return ControllerResult(response, records=records,
                                events=[f"Finalized feature levels updated: {changes}"]
                                if changes else [])

    # --- one feature (FeatureControlManager.updateFeature) ----------------------------------

    def _update_one(self, name: str, level: int, upgrade_type: int, proposed: dict[str, int],
                    records: list[tuple[Any, int]]) -> str | None:
        def invalid(message: str) -> str:
            return f"Invalid update version {level} for feature {name}. {message}"

        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            return invalid("The controller does not support the given upgrade type.")
        if name == METADATA_VERSION:
            current = self.features.metadata_version
        elif name == KRAFT_VERSION:
            current = self.features.kraft_version
        else:
            current = self.features.finalized.get(name, 0)
        if level < 0:
            return invalid("A feature version cannot be less than 0.")
        reason = self._reason_not_supported(name, level)
        if reason is not None:
            return invalid(reason)
        if level < current and upgrade_type == UPGRADE:
            return invalid("Can't downgrade the version of this feature without setting the "
                           "upgrade type to either safe or unsafe downgrade.")
        if level > current and upgrade_type != UPGRADE:
            return invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            return self._update_metadata_version(level, upgrade_type, records)
        if name == KRAFT_VERSION:
            if upgrade_type != UPGRADE:
                return None if level == current else invalid(
                    "Can't downgrade the version of this feature.")
            if level != current:
                return invalid("kraftpy keeps a static single-voter quorum (kraft.version 0); "
                               "a dynamic quorum (KIP-853) is not supported.")
            records.append((NoOpRecord(), 0))  # as Kafka: an offset for the answer to wait on
            return None
        feature = FEATURES.get(name)
        if feature is None:
            return invalid(f"Feature {name} not found.")
        try:
            validate_dependencies(name, feature.level(level, allow_unstable=True), proposed)
        except (FeatureError, ValueError) as exc:
            return invalid(str(exc))
        records.append((FeatureLevelRecord(name=name, feature_level=level), 0))
        return None

    def _reason_not_supported(self, name: str, level: int) -> str | None:
        """This controller, every registered broker, then every registered controller."""
        lo, hi = SUPPORTED_FEATURES.get(name, (0, 0))
        reason = _reason_not_supported(f"Local controller {self.features.node_id}", level, lo, hi)
        if reason:
            return reason
        for broker_id in sorted(self.brokers):
            lo, hi = self.brokers[broker_id].get(name, (0, 0))
            reason = _reason_not_supported(f"Broker {broker_id}", level, lo, hi)
            if reason:
                return reason
        if self.features.metadata_version >= MV_3_7_IV0:
            for controller_id in sorted(self.controllers):
                if controller_id == self.features.node_id:
                    continue
                lo, hi = self.controllers[controller_id].get(name, (0, 0))
                reason = _reason_not_supported(f"Controller {controller_id}", level, lo, hi)
                if reason:
                    return reason
        return None

    def _update_metadata_version(self, level: int, upgrade_type: int,
                                 records: list[tuple[Any, int]]) -> str | None:
        def invalid(message: str) -> str:
            return f"Invalid metadata.version {level}. {message}"

        if level not in METADATA_VERSIONS:
            return invalid(f"Valid versions are from {min(METADATA_VERSIONS)} to "
                           f"{max(METADATA_VERSIONS)}.")
        current = self.features.metadata_version
        if level < current and metadata_changed(current, level):
            if upgrade_type == UNSAFE_DOWNGRADE:
                return invalid("Unsafe metadata downgrade is not supported in this version.")
            return invalid("Refusing to perform the requested downgrade because it might "
                           "delete metadata information.")
        records.append((FeatureLevelRecord(name=METADATA_VERSION, feature_level=level), 0))
        return None

    def _elr_safety_records(self) -> list[tuple[Any, int]]:
        """ConfigurationControlManager.maybeGenerateElrSafetyRecords: a cluster-level
        min.insync.replicas if there is none, and no broker-level ones."""
        out: list[tuple[Any, int]] = []
        if (BROKER_RESOURCE, "", MIN_INSYNC_REPLICAS) not in self.configs:
            out.append((ConfigRecord(resource_type=BROKER_RESOURCE, resource_name="",
                                     name=MIN_INSYNC_REPLICAS,
                                     value=str(self.min_insync_replicas)), 0))
        per_broker = sorted((name for (kind, name, key) in self.configs
                             if kind == BROKER_RESOURCE and name and key == MIN_INSYNC_REPLICAS),
                            key=lambda n: (not n.isdigit(), int(n) if n.isdigit() else 0, n))
        out += [(ConfigRecord(resource_type=BROKER_RESOURCE, resource_name=name,
                              name=MIN_INSYNC_REPLICAS, value=None), 0) for name in per_broker]
        return out
