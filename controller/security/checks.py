"""Which ACL each request needs, as Kafka's KafkaApis / ControllerApis check them.

Two stages. `denial` runs before a request reaches its handler: a request that needs one
permission and lacks it gets its API's error response and never reaches the controller, so no
record is written. `restrict` runs on the answer of APIs whose resources are checked one by
one (transactional ids, topics, coordinator keys): unauthorised entries get their error code,
or, for ListTransactions, are left out, as Kafka does.

    AllocateProducerIds, BrokerRegistration,     CLUSTER_ACTION on CLUSTER      CLUSTER_AUTHORIZATION_FAILED
      BrokerHeartbeat, ControllerRegistration,
      Fetch, FetchSnapshot (raft), AssignReplicasToDirs, Envelope, AlterPartition,
      UpdateRaftVoter
    UnregisterBroker, CreateAcls, DeleteAcls,    ALTER on CLUSTER               CLUSTER_AUTHORIZATION_FAILED
      UpdateFeatures, ElectLeaders,
      AlterPartitionReassignments, AddRaftVoter, RemoveRaftVoter
    DescribeCluster                              DESCRIBE on CLUSTER (client listener), ALTER (CONTROLLER listener)
    DescribeQuorum, DescribeAcls,                DESCRIBE on CLUSTER            CLUSTER_AUTHORIZATION_FAILED
      ListPartitionReassignments
    Topic and config APIs                        per topic, in their handlers (api/topic_auth.py)
    InitProducerId with a transactional id       WRITE on TRANSACTIONAL_ID      TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    InitProducerId without                       IDEMPOTENT_WRITE on CLUSTER, or WRITE on any TOPIC  CLUSTER_AUTHORIZATION_FAILED
    FindCoordinator (transaction / group key)    DESCRIBE on TRANSACTIONAL_ID / GROUP, per key
    DescribeTransactions, ListTransactions       DESCRIBE on TRANSACTIONAL_ID, per id
    DescribeProducers                            READ on TOPIC, per topic
"""

from __future__ import annotations

import logging
from typing import Any

from kraftpy.controller.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kraftpy.controller.security.authorizer import Authorizer
from kraftpy.protocol.error_codes import ErrorCode

Op, RT = AclOperation, ResourceType
log = logging.getLogger("kraftpy.authorizer")

# registration, heartbeat, ids, controllers; raft Fetch and FetchSnapshot; AssignReplicasToDirs,
# Envelope
# and AlterPartition
CLUSTER_ACTION_APIS = frozenset({62, 63, 67, 70, 1, 59, 73, 58, 56, 82})
# UnregisterBroker, Create/DeleteAcls, UpdateFeatures, ElectLeaders, AlterPartitionReassignments
ALTER_CLUSTER_APIS = frozenset({64, 30, 31, 57, 43, 45, 80, 81})
DESCRIBE_CLUSTER_APIS = frozenset({55, 29, 46})  # DescribeQuorum, DescribeAcls,
# ListPartitionReassignments
DESCRIBE_CLUSTER = 60
INIT_PRODUCER_ID = 22
FIND_COORDINATOR, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 10, 61, 65, 66

# Kafka's Errors messages for the codes sent here.
MESSAGES = {
    ErrorCode.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
}
_CLUSTER_FAILED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
_TXN_FAILED = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def _cluster(az: Authorizer, ctx: Any, op: AclOperation) -> bool:
    return az.authorize(ctx.principal, ctx.client_host, op, RT.CLUSTER, CLUSTER_NAME)


def _error_response(api_key: int, request: Any, version: int, code: ErrorCode) -> Any:
    """The response of `api_key` that carries nothing but this error: the APIs whose answer
    carries the authorization message are built here; every other one as Kafka's
    getErrorResponse builds it (`api/errors.py`), at the request's version."""
    from kraftpy.protocol.registry import API_KEYS

    cls = API_KEYS[api_key].response
    message = MESSAGES.get(code, "")
    if api_key == INIT_PRODUCER_ID:
        return cls(error_code=code, producer_id=-1, producer_epoch=-1)
    if api_key == 63:
        return cls(error_code=code, is_caught_up=False, is_fenced=True, should_shut_down=False)
    if api_key == 62:
        return cls(error_code=code, broker_epoch=-1)
    if api_key in (29, 46, 55, 60, 64, 70):
        return cls(error_code=code, error_message=message)
    if api_key == 57:
        return cls(error_code=code, error_message=message, results=[])
    if api_key == 30:
        from kraftpy.protocol.messages.create_acls_response import AclCreationResult
        return cls(results=[AclCreationResult(error_code=code, error_message=message)
                            for _ in request.creations])
    if api_key == 31:
        from kraftpy.protocol.messages.delete_acls_response import DeleteAclsFilterResult
        return cls(filter_results=[DeleteAclsFilterResult(error_code=code, error_message=message,
                                                          matching_acls=[])
                                   for _ in request.filters])
    from kraftpy.controller.api import errors

    return errors.error_response(api_key, request, version, code)


def denial(az: Authorizer, ctx: Any, api_key: int, request: Any) -> Any | None:
    """The error response when the caller lacks what this request needs, else None."""
    if not az.enabled:
        return None
    code: ErrorCode | None = None
    if api_key in CLUSTER_ACTION_APIS:
        code = None if _cluster(az, ctx, Op.CLUSTER_ACTION) else _CLUSTER_FAILED
    elif api_key in ALTER_CLUSTER_APIS:
        code = None if _cluster(az, ctx, Op.ALTER) else _CLUSTER_FAILED
    elif api_key in DESCRIBE_CLUSTER_APIS:
        code = None if _cluster(az, ctx, Op.DESCRIBE) else _CLUSTER_FAILED
    elif api_key == DESCRIBE_CLUSTER:
        # Kafka's ControllerApis asks ALTER here; a broker's client listener DESCRIBE.
        op = Op.ALTER if getattr(ctx, "listener_type", "") == "controller" else Op.DESCRIBE
        code = None if _cluster(az, ctx, op) else _CLUSTER_FAILED
    elif api_key == INIT_PRODUCER_ID:
        code = _init_producer_id(az, ctx, request)
    if code is None:
        return None
    log.info("Principal = %s is denied api key %d from host %s: %s", ctx.principal, api_key,
             ctx.client_host, code.name)
    return _error_response(api_key, request, getattr(ctx, "api_version", 0), code)


def _init_producer_id(az: Authorizer, ctx: Any, request: Any) -> ErrorCode | None:
    txn = request.transactional_id
    if txn is not None:
        ok = az.authorize(ctx.principal, ctx.client_host, Op.WRITE, RT.TRANSACTIONAL_ID, txn)
        return None if ok else _TXN_FAILED
    if _cluster(az, ctx, Op.IDEMPOTENT_WRITE) or az.authorize_by_resource_type(
            ctx.principal, ctx.client_host, Op.WRITE, RT.TOPIC):
        return None
    return _CLUSTER_FAILED


def _may_describe_txn(az: Authorizer, ctx: Any, txn: str) -> bool:
    return az.authorize(ctx.principal, ctx.client_host, Op.DESCRIBE, RT.TRANSACTIONAL_ID, txn)


def restrict(az: Authorizer, ctx: Any, api_key: int, request: Any, response: Any) -> Any:
    """The response with every entry the caller may not see replaced by its error."""
    if not az.enabled or az.settings.super_users and ctx.principal in az.settings.super_users:
        return response
    if api_key == FIND_COORDINATOR:
        return _restrict_find_coordinator(az, ctx, request, response)
    if api_key == DESCRIBE_TRANSACTIONS:
        for state in response.transaction_states:
            if not _may_describe_txn(az, ctx, state.transactional_id):
                _copy_fields(type(state)(error_code=_TXN_FAILED), state)
    elif api_key == LIST_TRANSACTIONS:
        response.transaction_states = [
            s for s in response.transaction_states if _may_describe_txn(az, ctx, s.transactional_id)
        ]
    elif api_key == DESCRIBE_PRODUCERS:
        for topic in response.topics:
            if not az.authorize(ctx.principal, ctx.client_host, Op.READ, RT.TOPIC, topic.name):
                for p in topic.partitions:
                    p.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    p.error_message = MESSAGES[ErrorCode.TOPIC_AUTHORIZATION_FAILED]
                    p.active_producers = []
    return response


def _copy_fields(src: Any, dst: Any) -> None:
    for name in ("error_code", "transaction_state", "transaction_timeout_ms",
                 "transaction_start_time_ms", "producer_id", "producer_epoch", "topics"):
        if hasattr(src, name):
            setattr(dst, name, getattr(src, name))


def _coordinator_denied(az: Authorizer, ctx: Any, key_type: int, key: str) -> ErrorCode | None:
    if key_type == 1:
        return None if _may_describe_txn(az, ctx, key) else _TXN_FAILED
    if key_type == 0:
        ok = az.authorize(ctx.principal, ctx.client_host, Op.DESCRIBE, RT.GROUP, key)
        return None if ok else ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


def _restrict_find_coordinator(az: Authorizer, ctx: Any, request: Any, response: Any) -> Any:
    if ctx.api_version < 4:
        code = _coordinator_denied(az, ctx, request.key_type, request.key)
        if code is not None:
            response.error_code, response.error_message = code, MESSAGES[code]
            response.node_id, response.host, response.port = -1, "", -1
        return response
    for c in response.coordinators:
        code = _coordinator_denied(az, ctx, request.key_type, c.key)
        if code is not None:
            c.error_code, c.error_message = code, MESSAGES[code]
            c.node_id, c.host, c.port = -1, "", -1
    return response
