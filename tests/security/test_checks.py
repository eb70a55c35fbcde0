"""Which permission each request needs, and what an unauthorised caller gets back."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from kraftpy.controller.security import checks
from kraftpy.controller.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraftpy.controller.security.authorizer import Authorizer, AuthorizerSettings
from kraftpy.protocol.messages import describe_transactions_response as dtr
from kraftpy.protocol.messages import list_transactions_response as ltr
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from kraftpy.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kraftpy.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraftpy.protocol.messages.describe_acls_request import DescribeAclsRequest
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from kraftpy.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    TopicResponse,
)
from kraftpy.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from kraftpy.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.list_transactions_request import ListTransactionsRequest
from kraftpy.protocol.messages.unregister_broker_request import UnregisterBrokerRequest

Op, RT = AclOperation, ResourceType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@dataclass
class Ctx:
    principal: str = "User:p"
    client_host: str = "10.0.0.1"
    listener_type: str = "broker"
    api_version: int = 4


def authorizer(*acls: AclBinding, enabled: bool = True) -> Authorizer:
    table = {uuid.uuid4(): a for a in acls}
    return Authorizer(AuthorizerSettings(enabled=enabled, super_users=frozenset({"User:su"})),
                      lambda: table)


def grant(rt: ResourceType, name: str, op: AclOperation, perm=ALLOW, pt=PatternType.LITERAL,
          principal: str = "User:p") -> AclBinding:
    return AclBinding(rt, name, pt, principal, "*", op, perm)


CLUSTER_ACTION_REQUESTS = [
    (62, BrokerRegistrationRequest(broker_id=1)),
    (63, BrokerHeartbeatRequest(broker_id=1)),
    (67, AllocateProducerIdsRequest(broker_id=1)),
]


@pytest.mark.parametrize(("key", "request_"), CLUSTER_ACTION_REQUESTS)
def test_broker_rpcs_need_cluster_action(key: int, request_) -> None:
    denied = checks.denial(authorizer(), Ctx(), key, request_)
    assert denied is not None and denied.error_code == 31
    encoded = denied.encode(type(denied).VALID_VERSIONS[1])  # a response that encodes
    assert encoded
    ok = authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION))
    assert checks.denial(ok, Ctx(), key, request_) is None
    # ALL grants it too; DESCRIBE or IDEMPOTENT_WRITE do not
    assert checks.denial(authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.ALL)), Ctx(), key,
                         request_) is None
    assert checks.denial(authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)),
                         Ctx(), key, request_) is not None


def test_heartbeat_denial_fences() -> None:
    denied = checks.denial(authorizer(), Ctx(), 63, BrokerHeartbeatRequest(broker_id=1))
    assert denied.is_fenced and not denied.is_caught_up


def test_init_producer_id_rules() -> None:
    idem = InitProducerIdRequest(transactional_id=None)
    txn = InitProducerIdRequest(transactional_id="app-1")
    nobody = authorizer()
    r = checks.denial(nobody, Ctx(), 22, idem)
    assert (r.error_code, r.producer_id, r.producer_epoch) == (31, -1, -1)
    assert checks.denial(nobody, Ctx(), 22, txn).error_code == 53
    assert checks.denial(authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE)),
                         Ctx(), 22, idem) is None
    # WRITE on any topic implies idempotent writes (KIP-679)
    assert checks.denial(authorizer(grant(RT.TOPIC, "orders", Op.WRITE)), Ctx(), 22, idem) is None
    writer = authorizer(grant(RT.TRANSACTIONAL_ID, "app-", Op.WRITE, pt=PatternType.PREFIXED))
    assert checks.denial(writer, Ctx(), 22, txn) is None
    assert checks.denial(writer, Ctx(), 22, idem).error_code == 31
    assert checks.denial(nobody, Ctx(principal="User:su"), 22, txn) is None
    assert checks.denial(authorizer(enabled=False), Ctx(), 22, txn) is None


def test_cluster_describe_and_alter_apis() -> None:
    describe = authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    alter = authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.ALTER))
    quorum, cluster = DescribeQuorumRequest(), DescribeClusterRequest()
    assert checks.denial(authorizer(), Ctx(), 55, quorum).error_code == 31
    assert checks.denial(describe, Ctx(), 55, quorum) is None
    assert checks.denial(describe, Ctx(), 60, cluster) is None
    # on the CONTROLLER listener, DescribeCluster needs ALTER (Kafka's ControllerApis)
    ctl = Ctx(listener_type="controller")
    r = checks.denial(describe, ctl, 60, cluster)
    assert r.error_code == 31 and r.error_message == "Cluster authorization failed."
    assert checks.denial(alter, ctl, 60, cluster) is None
    assert checks.denial(describe, Ctx(), 64, UnregisterBrokerRequest()).error_code == 31
    assert checks.denial(alter, Ctx(), 64, UnregisterBrokerRequest()) is None


def test_acl_apis() -> None:
    create = CreateAclsRequest(creations=[AclCreation(), AclCreation()])
    delete = DeleteAclsRequest(filters=[DeleteAclsFilter()])
    describe = authorizer(grant(RT.CLUSTER, CLUSTER_NAME, Op.DESCRIBE))
    r = checks.denial(describe, Ctx(), 30, create)
    assert [x.error_code for x in r.results] == [31, 31]
    r = checks.denial(describe, Ctx(), 31, delete)
    assert [x.error_code for x in r.filter_results] == [31]
    assert checks.denial(describe, Ctx(), 29, DescribeAclsRequest()) is None
    assert checks.denial(authorizer(), Ctx(), 29, DescribeAclsRequest()).error_code == 31


def test_find_coordinator_per_key() -> None:
    az = authorizer(grant(RT.TRANSACTIONAL_ID, "mine", Op.WRITE))
    req = FindCoordinatorRequest(key_type=1, coordinator_keys=["mine", "theirs"])
    resp = FindCoordinatorResponse(coordinators=[
        Coordinator(key="mine", node_id=1, host="h", port=9092),
        Coordinator(key="theirs", node_id=1, host="h", port=9092)])
    out = checks.restrict(az, Ctx(), 10, req, resp)
    assert [(c.key, c.error_code, c.node_id) for c in out.coordinators] == [
        ("mine", 0, 1), ("theirs", 53, -1)]
    old = FindCoordinatorResponse(node_id=1, host="h", port=9092)
    out = checks.restrict(az, Ctx(api_version=2), 10,
                          FindCoordinatorRequest(key="theirs", key_type=1), old)
    assert (out.error_code, out.node_id, out.port) == (53, -1, -1)
    group = checks.restrict(az, Ctx(api_version=2), 10, FindCoordinatorRequest(key="g"),
                            FindCoordinatorResponse(error_code=15))
    assert group.error_code == 30


def test_transactions_and_producers_are_restricted_per_entry() -> None:
    az = authorizer(grant(RT.TRANSACTIONAL_ID, "mine", Op.DESCRIBE),
                    grant(RT.TOPIC, "orders", Op.READ))
    described = dtr.DescribeTransactionsResponse(transaction_states=[
        dtr.TransactionState(transactional_id="mine", producer_id=5, transaction_state="Ongoing"),
        dtr.TransactionState(transactional_id="theirs", producer_id=6,
                             transaction_state="Ongoing")])
    out = checks.restrict(az, Ctx(), 65, DescribeTransactionsRequest(), described)
    assert [(s.transactional_id, s.error_code, s.producer_id) for s in out.transaction_states] \
        == [("mine", 0, 5), ("theirs", 53, 0)]
    listed = ltr.ListTransactionsResponse(transaction_states=[
        ltr.TransactionState(transactional_id="mine"),
        ltr.TransactionState(transactional_id="theirs")])
    out = checks.restrict(az, Ctx(), 66, ListTransactionsRequest(), listed)
    assert [s.transactional_id for s in out.transaction_states] == ["mine"]
    producers = DescribeProducersResponse(topics=[
        TopicResponse(name="orders", partitions=[PartitionResponse(partition_index=0)]),
        TopicResponse(name="secret", partitions=[PartitionResponse(partition_index=0)])])
    out = checks.restrict(az, Ctx(), 61, DescribeProducersRequest(topics=[
        TopicRequest(name="orders"), TopicRequest(name="secret")]), producers)
    assert [p.error_code for t in out.topics for p in t.partitions] == [0, 29]
    # super users and a disabled authorizer see everything
    assert len(checks.restrict(az, Ctx(principal="User:su"), 66, ListTransactionsRequest(),
                               ltr.ListTransactionsResponse(transaction_states=[
                                   ltr.TransactionState(transactional_id="x")])
                               ).transaction_states) == 1


@pytest.mark.parametrize("version", [4, 12, 18])
def test_a_denied_raft_fetch_answers_as_kafkas_getErrorResponse_at_its_version(version) -> None:
    """CLUSTER_ACTION is needed; the answer mirrors the partition asked for with the error
    (and carries it on top from v7), encodable at the version asked (v4 has no top-level
    error code)."""
    from kraftpy.protocol.messages.fetch_response import FetchResponse
    from support.raft import fetch

    ctx = Ctx()
    ctx.api_version = version
    denied = checks.denial(authorizer(), ctx, 1, fetch(0))
    back = FetchResponse.decode(denied.encode(version), version)
    assert [p.error_code for t in back.responses for p in t.partitions] == [31]
    assert back.error_code == (31 if version >= 7 else 0)
