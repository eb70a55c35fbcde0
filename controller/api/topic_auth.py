"""Per-resource ACL checks of the topic and config APIs, made where the handlers need them.

Kafka checks these resources one by one inside ControllerApis (a topic the caller may not
create is answered TOPIC_AUTHORIZATION_FAILED, the rest go on), so they cannot be the security
layer's all-or-nothing check. Without an authorizer every check passes.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.security.acl import CLUSTER_NAME, AclOperation, ResourceType


def allowed(node: api.Node, ctx: api.RequestContext, op: AclOperation,
            resource_type: ResourceType, name: str) -> bool:
    security = getattr(node, "security", None)
    if security is None or not security.authorizer.enabled:
        return True
    return security.authorizer.authorize(ctx.principal, ctx.client_host, op, resource_type, name)


def on_cluster(node: api.Node, ctx: api.RequestContext, op: AclOperation) -> bool:
    return allowed(node, ctx, op, ResourceType.CLUSTER, CLUSTER_NAME)


def on_topic(node: api.Node, ctx: api.RequestContext, op: AclOperation, name: str) -> bool:
    """`op` on the cluster covers every topic (Kafka's hasClusterAuth), else on the topic."""
    return on_cluster(node, ctx, op) or allowed(node, ctx, op, ResourceType.TOPIC, name)
