"""ApiVersions (key 18).

Versions served: 0-4. Listeners: client and CONTROLLER.
Behaviour: lists exactly the APIs the registry serves on the listener's type, with their
ranges; v3+ adds the supported and finalized features as a Kafka 4.1 combined node does (its
order, and FinalizedFeaturesEpoch: the controller's on CONTROLLER, the broker's on a client
listener). A version we do not serve is answered
(KIP-511) at v0 with UNSUPPORTED_VERSION and only our ApiVersions range, without reading the
body; the server sends it with response header v0, as every ApiVersions response. v3+ with a
ClientSoftwareName/Version outside Kafka's pattern gets INVALID_REQUEST.
Skipped: ZkMigrationReady is always false; there is no throttling of ApiVersions.
"""

from __future__ import annotations

import math
import re
from typing import Any

from kraftpy.controller import api
from kraftpy.controller.feature_control import KRAFT_VERSION, METADATA_VERSION
from kraftpy.controller.feature_updates import java_hash_map_order
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.api_versions_response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)

API_KEY = 18
VERSIONS = (0, 4)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = ApiVersionsRequest

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def unsupported_version_response() -> ApiVersionsResponse:
    """The KIP-511 answer to an ApiVersions version we do not serve (encode at v0)."""
    return ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersion(api_key=API_KEY, min_version=VERSIONS[0], max_version=VERSIONS[1])],
    )


def _java_copy_order(names: list[str]) -> list[str]:
    """The order of `new HashMap<>(m)` for a map of these names (Java sizes the table for
    them), iterated after metadata.version is put (FinalizedFeatures' constructor)."""
    size = len(names)
    capacity = 16
    if size:
        capacity = 1
        while capacity < math.ceil(size / 0.75):
            capacity *= 2
    if METADATA_VERSION not in names:
        names = [*names, METADATA_VERSION]
    return java_hash_map_order(names, capacity)


def finalized_order(finalized: dict[str, int]) -> list[str]:
    """Kafka's wire order of FinalizedFeatures: FinalizedFeatures copies the image's levels
    (without metadata.version) into a HashMap and puts metadata.version; a kraft.version
    above 0 is put into one more copy first. Ties within a bucket: metadata.version last."""
    others = sorted(n for n in finalized if n not in (METADATA_VERSION, KRAFT_VERSION))
    if finalized.get(KRAFT_VERSION, 0) > 0:
        others = [*_java_copy_order(others), KRAFT_VERSION]
        return _java_copy_order([n for n in others if n != METADATA_VERSION]
                                + [METADATA_VERSION])
    return _java_copy_order(others)


def _features(node: api.Node, version: int, listener_type: str) -> dict[str, Any]:
    """SupportedFeatures, FinalizedFeatures and their epoch, in the order a Kafka 4.1 node
    sends them (its HashMaps' iteration order). The controller's epoch is the offset where
    the levels last changed; a broker's is the last offset of its metadata image."""
    features = node.features()
    supported = [
        SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
        for name in java_hash_map_order(features.supported)
        for lo, hi in (features.supported[name],)
        # Before v4, ranges starting at 0 are left out (old clients reject them).
        if version >= 4 or lo > 0
    ]
    finalized = [
        FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
        for name in finalized_order(features.finalized)
        # Before the bootstrap records are replayed no metadata.version is finalized yet
        # (a Raft peer's ApiVersions can come that early): it is left out like any level 0.
        for level in (features.finalized.get(name, 0),)
        if level != 0
    ]
    epoch = features.epoch if listener_type == api.CONTROLLER else features.image_epoch
    return {
        "supported_features": supported,
        "finalized_features_epoch": epoch,
        "finalized_features": finalized,
    }


async def handle(
    node: api.Node, request: ApiVersionsRequest, ctx: api.RequestContext
) -> ApiVersionsResponse:
    version = ctx.api_version
    if version >= 3 and not (
        _SOFTWARE.fullmatch(request.client_software_name or "")
        and _SOFTWARE.fullmatch(request.client_software_version or "")
    ):
        return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
    keys = [
        ApiVersion(api_key=key, min_version=lo, max_version=hi)
        for key, lo, hi in api.served(ctx.listener_type)
    ]
    extra = _features(node, version, ctx.listener_type) if version >= 3 else {}
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0, **extra)
