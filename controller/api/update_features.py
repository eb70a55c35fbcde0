"""UpdateFeatures (key 57).

Versions served: 0-2. Listeners: client and CONTROLLER (a Kafka broker forwards it to its
controller; kraftpy's combined node answers it on either, with the same controller).
Behaviour: Kafka 4.1's checks (controller/feature_updates.py): upgrade, safe and unsafe
downgrade, every registered broker's and controller's supported range, the dependencies
between features; one failing update fails all with INVALID_UPDATE_VERSION and nothing is
written; ValidateOnly writes nothing; success writes FeatureLevelRecords in one batch and is
answered once they are fsynced; v0-1 answers per feature, v2 only at the top level.
Needs ALTER on CLUSTER when an authorizer is configured.
Skipped: kraft.version 1 (a dynamic quorum) is refused; the request timeout is not applied.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.update_features_request import UpdateFeaturesRequest
from kraftpy.protocol.messages.update_features_response import UpdateFeaturesResponse

API_KEY = 57
VERSIONS = (0, 2)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = UpdateFeaturesRequest


def error_response(code: int) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code, error_message=None,
                                  results=[])


async def handle(
    node: api.Node, request: UpdateFeaturesRequest, ctx: api.RequestContext
) -> UpdateFeaturesResponse:
    return await api.through_controller(node, request, ctx, error_response)
