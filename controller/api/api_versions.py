"""ApiVersions (key 18).

Versions served: 0-4. Listeners: client and CONTROLLER.
Behaviour: lists exactly the APIs the registry serves on the listener's type, with their
ranges; v3+ adds the supported and finalized features. A version we do not serve is answered
(KIP-511) at v0 with UNSUPPORTED_VERSION and only our ApiVersions range, without reading the
body; the server sends it with response header v0, as every ApiVersions response. v3+ with a
ClientSoftwareName/Version outside Kafka's pattern gets INVALID_REQUEST.
Skipped: ZkMigrationReady is always false; there is no throttling of ApiVersions.
"""

from __future__ import annotations

import re
from typing import Any

from kraftpy.controller import api
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


def _features(node: api.Node, version: int) -> dict[str, Any]:
    features = node.features()
    supported = [
        SupportedFeatureKey(name=name, min_version=lo, max_version=hi)
        for name, (lo, hi) in sorted(features.supported.items())
        # Before v4, ranges starting at 0 are left out (old clients reject them).
        if version >= 4 or lo > 0
    ]
    finalized = [
        FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
        for name, level in sorted(features.finalized.items())
        if level != 0
    ]
    return {
        "supported_features": supported,
        "finalized_features_epoch": features.epoch,
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
    extra = _features(node, version) if version >= 3 else {}
    return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=keys, throttle_time_ms=0, **extra)
