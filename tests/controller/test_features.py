"""Kafka 4.1's features: format defaults and refusals, the bootstrap, replay, UpdateFeatures.

Expected levels and messages are Kafka 4.1's (`kafka-storage format` / `version-mapping` and
FeatureControlManager.updateFeature of kafka-metadata 4.1.0), checked by running the real
tools while this was written; tests/server/test_features_kafka.py runs them where Java is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from kraftpy.controller.api.api_versions import finalized_order
from kraftpy.controller.feature_control import (
    SUPPORTED_FEATURES,
    FeatureError,
    UnsupportedFeatureLevel,
    bootstrap_records,
    format_levels,
    metadata_version_from_string,
)
from kraftpy.controller.feature_updates import java_hash_map_order, metadata_changed
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.update_features_request import (
    FeatureUpdateKey,
    UpdateFeaturesRequest,
)
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord
from support.controller_harness import KAFKA_41_FEATURES, Harness, settings

ELR, TV, GV = "eligible.leader.replicas.version", "transaction.version", "group.version"
KAFKA_41_DEFAULTS = {"metadata.version": 27, "kraft.version": 0, TV: 2, GV: 1, ELR: 1,
                     "share.version": 0, "streams.version": 0}


# --- what a Kafka 4.1 controller supports and `kafka-storage format` finalizes -------------

def test_supported_ranges_are_a_kafka_41_controllers() -> None:
    assert SUPPORTED_FEATURES == {"metadata.version": (7, 27), "kraft.version": (0, 1),
                                  TV: (0, 2), GV: (0, 1), ELR: (0, 1), "share.version": (0, 1)}


@pytest.mark.parametrize(("release", "expected"), [
    (None, KAFKA_41_DEFAULTS),
    ("4.0", {**KAFKA_41_DEFAULTS, "metadata.version": 25, ELR: 0}),
    ("4.0-IV1", {**KAFKA_41_DEFAULTS, "metadata.version": 23, TV: 0, ELR: 0}),
    ("3.9", {**KAFKA_41_DEFAULTS, "metadata.version": 21, TV: 0, GV: 0, ELR: 0}),
    ("3.8.1", {**KAFKA_41_DEFAULTS, "metadata.version": 20, TV: 0, GV: 0, ELR: 0}),
    ("3.3", {**KAFKA_41_DEFAULTS, "metadata.version": 7, TV: 0, GV: 0, ELR: 0}),
])
def test_format_defaults_are_kafkas(release: str | None, expected: dict[str, int]) -> None:
    assert format_levels(release, {}) == expected


def test_format_takes_a_feature_over_its_default() -> None:
    assert format_levels(None, {TV: 0, "share.version": 1}) == {
        **KAFKA_41_DEFAULTS, TV: 0, "share.version": 1}
    # transaction.version has no dependency: level 2 on 3.6 is accepted, as Kafka does.
    assert format_levels("3.6", {TV: 2})[TV] == 2


@pytest.mark.parametrize(("release", "features", "message"), [
    ("3.9", {ELR: 1}, "eligible.leader.replicas.version could not be set to 1 because it "
                      "depends on metadata.version level 23"),
    ("4.1", {"metadata.version": 27}, "Use --release-version instead of --feature "
                                      "metadata.version=X to avoid ambiguity."),
    (None, {"foo": 1}, "Unsupported feature: foo. Supported features are: eligible.leader."
                       "replicas.version, group.version, kraft.version, share.version, "
                       "streams.version, transaction.version"),
    ("4.2", {}, "Version 4.2 is not a valid version. The minimum version is 3.3-IV3 and the "
                "maximum version is 4.2-IV1"),
    ("4.2-IV0", {}, "metadata.version 4.2-IV0 is not yet stable."),
    (None, {"metadata.version": 28}, "metadata.version 4.2-IV0 is not yet stable."),
    (None, {"metadata.version": 6}, "No MetadataVersion with feature level 6. Valid feature "
                                    "levels are from 7 to 29."),
    (None, {TV: 3}, "No feature:transaction.version with feature level 3"),
    (None, {TV: -1}, "No feature:transaction.version with feature level -1"),
    (None, {"streams.version": 1}, "No feature:streams.version with feature level 1"),
    (None, {"kraft.version": 1}, "Cannot set kraft.version to 1 unless one of the flags "
                                 "--standalone, --initial-controllers, or "
                                 "--no-initial-controllers is used."),
])
def test_format_refusals_are_kafkas(release: str | None, features: dict[str, int],
                                    message: str) -> None:
    with pytest.raises(FeatureError) as info:
        format_levels(release, features)
    assert str(info.value).startswith(message)


def test_release_versions_parse_as_kafkas() -> None:
    assert metadata_version_from_string("3.7") == 19  # a release: its latest level (3.7-IV4)
    assert metadata_version_from_string("3.7-IV0") == 15
    assert metadata_version_from_string("4.1.0") == 27


# --- the bootstrap: Kafka's ActivationRecordsGenerator ---------------------------------------

def _shape(records: list[tuple[Any, int]]) -> list[tuple[str, Any]]:
    return [(type(r).__name__, r.to_json(v)) for r, v in records]


def test_bootstrap_writes_kafkas_activation_records() -> None:
    levels = format_levels(None, {})
    mv = levels.pop("metadata.version")
    shape = _shape(bootstrap_records(mv, levels, min_insync_replicas=2))
    assert [name for name, _ in shape] == [
        "BeginTransactionRecord", "FeatureLevelRecord", "FeatureLevelRecord",
        "FeatureLevelRecord", "FeatureLevelRecord", "ConfigRecord", "EndTransactionRecord"]
    assert [j["name"] for n, j in shape if n == "FeatureLevelRecord"] == [
        "metadata.version", ELR, GV, TV]
    assert shape[5][1] == {"resourceType": 4, "resourceName": "", "name": "min.insync.replicas",
                           "value": "2"}
    # No ELR, no cluster-level min.insync.replicas; before 3.6-IV1, no metadata transaction.
    assert [n for n, _ in _shape(bootstrap_records(12, {TV: 2}))] == [
        "FeatureLevelRecord", "FeatureLevelRecord"]


def test_bootstrap_refuses_a_level_we_cannot_run() -> None:
    with pytest.raises(UnsupportedFeatureLevel, match="share.version level 2"):
        bootstrap_records(27, {"share.version": 2})
    with pytest.raises(UnsupportedFeatureLevel, match=r"metadata.version level 28 \(4.2-IV0\)"):
        bootstrap_records(28, {})


def test_a_node_bootstraps_kafkas_defaults_and_epochs_count_at_the_transaction_end() -> None:
    levels = format_levels(None, {})
    mv = levels.pop("metadata.version")
    h = Harness(settings=settings(metadata_version=mv, bootstrap_features=levels))
    f = h.qc.features
    assert f.finalized == {"metadata.version": 27, ELR: 1, GV: 1, TV: 2}
    assert h.qc.configs[(4, "", "min.insync.replicas")].value == "1"
    assert f.epoch == 6  # the EndTransactionRecord of offsets 0-6, as Kafka's controller says
    assert (f.partition_record_version(), f.transaction_log_value_version()) == (2, 1)


def test_record_versions_follow_the_levels() -> None:
    h = Harness(settings=settings(metadata_version=17))
    assert (h.qc.features.partition_record_version(),
            h.qc.features.register_broker_record_version(),
            h.qc.features.transaction_log_value_version()) == (1, 3, 0)
    h = Harness(settings=settings(metadata_version=14))
    assert h.qc.features.partition_change_record_version() == 0


def test_replay_refuses_a_level_beyond_ours_and_skips_kraft_version() -> None:
    h = Harness()
    with pytest.raises(UnsupportedFeatureLevel, match=f"{TV} level 3 is not supported"):
        h.qc.replay(FeatureLevelRecord(name=TV, feature_level=3), 0, h.end)
    h.qc.replay(FeatureLevelRecord(name="kraft.version", feature_level=1), 0, h.end)
    assert "kraft.version" not in h.qc.features.finalized  # KAFKA-18979: raft's, not ours


# --- UpdateFeatures ---------------------------------------------------------------------------

@dataclass
class Answer:
    response: Any
    written: list[Any]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.response, name)


def _update(h: Harness, *updates: tuple[str, int, int], version: int = 2,
            validate_only: bool = False) -> Any:
    """The answer, with the records the request wrote (`written`)."""
    request = UpdateFeaturesRequest(feature_updates=[
        FeatureUpdateKey(feature=n, max_version_level=lvl, upgrade_type=t)
        for n, lvl, t in updates], validate_only=validate_only)
    before = h.end
    response = h.handle(request, version)
    return Answer(response, [decode_metadata_record(value)[0]
                             for value, _ in h.records[before - h.snapshot_end:]])


def _fails(response: Any, message: str) -> None:
    assert response.error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert response.error_message == ("The update failed for all features since the following "
                                      f"feature had an error: {message}")
    assert response.written == [] and response.results == []


def test_upgrade_writes_one_record_and_answers_per_feature_before_v2() -> None:
    h = Harness(settings=settings(metadata_version=24))
    r = _update(h, (TV, 2, 1), version=1)
    assert (r.error_code, r.error_message) == (0, None)
    assert [(x.feature, x.error_code, x.error_message) for x in r.results] == [(TV, 0, "NONE")]
    assert h.qc.features.finalized[TV] == 2 and len(r.written) == 1
    assert h.qc.features.epoch == h.end - 1
    r = _update(h, (GV, 1, 1), version=2)
    assert r.error_code == 0 and r.results == [] and h.qc.features.finalized[GV] == 1


def test_downgrades_need_their_upgrade_type_and_metadata_loss_is_refused() -> None:
    h = Harness()
    _fails(_update(h, ("metadata.version", 26, 1)),
           "Invalid update version 26 for feature metadata.version. Can't downgrade the version "
           "of this feature without setting the upgrade type to either safe or unsafe downgrade.")
    # 27 -> 23: no level in between changed the metadata format, so the downgrade is safe.
    assert _update(h, ("metadata.version", 23, 2)).error_code == 0
    assert h.qc.features.metadata_version == 23
    _fails(_update(h, ("metadata.version", 22, 2)),
           "Invalid metadata.version 22. Refusing to perform the requested downgrade because it "
           "might delete metadata information.")
    _fails(_update(h, ("metadata.version", 22, 3)),
           "Invalid metadata.version 22. Unsafe metadata downgrade is not supported in this "
           "version.")
    _fails(_update(h, ("metadata.version", 24, 2)),
           "Invalid update version 24 for feature metadata.version. Can't downgrade to a newer "
           "version.")
    assert (metadata_changed(27, 23), metadata_changed(27, 22), metadata_changed(15, 14)) == (
        False, True, True)


def test_dependencies_ranges_and_names_are_checked_as_kafka_does() -> None:
    h = Harness(settings=settings(metadata_version=21))
    _fails(_update(h, (ELR, 1, 1)),
           f"Invalid update version 1 for feature {ELR}. {ELR} could not be set to 1 because it "
           "depends on metadata.version level 23")
    # Upgrading metadata.version in the same request meets the dependency.
    assert _update(h, (ELR, 1, 1), ("metadata.version", 27, 1)).error_code == 0
    _fails(_update(h, (TV, 3, 1)), "Invalid update version 3 for feature transaction.version. "
                                   "Local controller 1 only supports versions 0-2")
    _fails(_update(h, ("streams.version", 1, 1)), "Invalid update version 1 for feature "
                                                  "streams.version. Local controller 1 does not "
                                                  "support this feature.")
    _fails(_update(h, ("foo", 0, 1)), "Invalid update version 0 for feature foo. Feature foo not "
                                      "found.")
    _fails(_update(h, (TV, -1, 2)), "Invalid update version -1 for feature transaction.version. "
                                    "A feature version cannot be less than 0.")
    _fails(_update(h, (TV, 1, 0)), "Invalid update version 1 for feature transaction.version. "
                                   "The controller does not support the given upgrade type.")


def test_the_first_error_in_kafkas_map_order_is_reported() -> None:
    h = Harness()
    # Kafka checks its HashMap of updates in bucket order: group.version before
    # transaction.version, whatever the request's order.
    _fails(_update(h, (TV, 9, 1), (GV, 9, 1)), "Invalid update version 9 for feature "
                                               "group.version. Local controller 1 only supports "
                                               "versions 0-1")


def test_a_registered_brokers_range_is_checked() -> None:
    h = Harness()
    narrow = tuple(f for f in KAFKA_41_FEATURES if f[0] != TV)  # no transaction.version
    assert h.register(7, features=narrow).error_code == 0
    _fails(_update(h, (TV, 1, 1)), "Invalid update version 1 for feature transaction.version. "
                                   "Broker 7 does not support this feature.")


def test_validate_only_writes_nothing_and_turning_elr_on_sets_min_insync() -> None:
    h = Harness(settings=settings(metadata_version=26, min_insync_replicas=2))
    r = _update(h, (ELR, 1, 1), validate_only=True)
    assert r.error_code == 0 and r.written == [] and ELR not in h.qc.features.finalized
    r = _update(h, (ELR, 1, 1))
    assert [type(x).__name__ for x in r.written] == ["ConfigRecord", "FeatureLevelRecord"]
    assert h.qc.configs[(4, "", "min.insync.replicas")].value == "2"
    assert h.qc.features.elr_enabled()
    # Disabling: a FeatureLevelRecord at level 0 removes the feature.
    assert _update(h, (ELR, 0, 2)).error_code == 0 and not h.qc.features.elr_enabled()


def test_kraft_version_stays_zero() -> None:
    h = Harness()
    r = _update(h, ("kraft.version", 0, 1))
    assert r.error_code == 0 and [type(x).__name__ for x in r.written] == ["NoOpRecord"]
    _fails(_update(h, ("kraft.version", 1, 1)),
           "Invalid update version 1 for feature kraft.version. kraftpy keeps a static "
           "single-voter quorum (kraft.version 0); a dynamic quorum (KIP-853) is not supported.")


# --- ApiVersions' order ----------------------------------------------------------------------

def test_feature_lists_come_in_a_kafka_41_nodes_order() -> None:
    # As recorded from a real Kafka 4.1 combined node (ApiVersions v4 on either listener).
    assert java_hash_map_order(SUPPORTED_FEATURES) == [
        GV, "kraft.version", "metadata.version", "share.version", TV, ELR]
    assert finalized_order({"metadata.version": 27, ELR: 1, GV: 1, TV: 2}) == [
        GV, TV, ELR, "metadata.version"]
