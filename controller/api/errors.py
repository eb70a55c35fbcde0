"""Each API's error response: the answer Kafka gives a request it failed to handle.

Kafka answers a request whose handler threw with `AbstractRequest.getErrorResponse`, which
every request type implements on its own: most set the top-level ErrorCode, some mirror the
request's entries (a result per ACL creation or filter, a state per transactional id, a
partition per topic partition, a topic per Metadata topic) and give each the error. This
module is that table for the APIs kraftpy serves; an API not in it gets its top-level
ErrorCode when its response has one at that version (`generic`). Fields a version lacks are
left at their defaults, so every answer encodes at the version asked.

Used by dispatch for a handler that raised or answered something that does not encode
(UNKNOWN_SERVER_ERROR), by handlers that refuse a request whole (Metadata's INVALID_REQUEST),
and by `through_controller` when the controller fails.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.registry import API_KEYS

# Kafka's Errors message for UNKNOWN_SERVER_ERROR; the responses that carry Errors.message()
# (FindCoordinator, DescribeQuorum) send it. ApiError, used by the others, sends no message
# for this code, so that nothing about the failure leaks to the client.
UNKNOWN_SERVER_ERROR_MESSAGE = (
    "The server experienced an unexpected error when processing the request.")

Builder = Callable[[type, Any, int, int], Any]


def _message(code: int) -> str:
    return UNKNOWN_SERVER_ERROR_MESSAGE if code == ErrorCode.UNKNOWN_SERVER_ERROR else ""


def _top_level(cls: type, request: Any, version: int, code: int) -> Any:
    """ErrorCode only (ListTransactions, AllocateProducerIds, SaslHandshake, ...)."""
    return cls(error_code=code)


def _with_api_error(cls: type, request: Any, version: int, code: int) -> Any:
    """ErrorCode and ApiError's message, none for UNKNOWN_SERVER_ERROR (DescribeCluster,
    DescribeAcls, UnregisterBroker, SaslAuthenticate)."""
    return cls(error_code=code, error_message=None)


def _api_versions(cls: type, request: Any, version: int, code: int) -> Any:
    return cls(error_code=code, api_keys=[])


def _metadata(cls: type, request: Any, version: int, code: int) -> Any:
    """A topic per topic asked for (a null name becomes ""), each with the error; the
    top-level ErrorCode too from v13. No brokers, no cluster id, no controller."""
    from kraftpy.protocol.messages.metadata_response import MetadataResponseTopic

    topics = [MetadataResponseTopic(error_code=code, name=t.name or "", topic_id=t.topic_id,
                                    is_internal=False, partitions=[])
              for t in request.topics or ()]
    return cls(topics=topics, error_code=code if version >= 13 else 0)


def _find_coordinator(cls: type, request: Any, version: int, code: int) -> Any:
    """Before v4 one coordinator-less answer; from v4 one per key asked for."""
    message = _message(code)
    if version < 4:
        return cls(error_code=code, error_message=message, node_id=-1, host="", port=-1)
    from kraftpy.protocol.messages.find_coordinator_response import Coordinator

    return cls(coordinators=[Coordinator(key=key, node_id=-1, host="", port=-1,
                                         error_code=code, error_message=message)
                             for key in request.coordinator_keys])


def _init_producer_id(cls: type, request: Any, version: int, code: int) -> Any:
    return cls(error_code=code, producer_id=-1, producer_epoch=-1)


def _describe_quorum(cls: type, request: Any, version: int, code: int) -> Any:
    """Top-level error with Errors' message (ignorable: v0 and v1 go without it)."""
    return cls(error_code=code, error_message=_message(code))


def _describe_producers(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.protocol.messages.describe_producers_response import (
        PartitionResponse,
        TopicResponse,
    )

    return cls(topics=[TopicResponse(name=t.name, partitions=[
        PartitionResponse(partition_index=i, error_code=code) for i in t.partition_indexes])
        for t in request.topics])


def _describe_transactions(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.protocol.messages.describe_transactions_response import TransactionState

    return cls(transaction_states=[TransactionState(transactional_id=t, error_code=code)
                                   for t in request.transactional_ids])


def _broker_registration(cls: type, request: Any, version: int, code: int) -> Any:
    return cls(error_code=code, broker_epoch=-1)


def _broker_heartbeat(cls: type, request: Any, version: int, code: int) -> Any:
    return cls(error_code=code, is_caught_up=False, is_fenced=True, should_shut_down=False)


def _create_acls(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.protocol.messages.create_acls_response import AclCreationResult

    return cls(results=[AclCreationResult(error_code=code, error_message=None)
                        for _ in request.creations])


def _delete_acls(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.protocol.messages.delete_acls_response import DeleteAclsFilterResult

    return cls(filter_results=[DeleteAclsFilterResult(error_code=code, error_message=None,
                                                      matching_acls=[])
                               for _ in request.filters])


def _fetch(cls: type, request: Any, version: int, code: int) -> Any:
    """A partition per partition asked for, each with the error and no offsets; the top-level
    ErrorCode too (v7+) and the request's session id."""
    from kraftpy.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData

    topics = [FetchableTopicResponse(
        topic=t.topic if version < 13 else "", topic_id=t.topic_id, partitions=[
            PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1,
                          records=b"") for p in t.partitions])
        for t in request.topics]
    return cls(error_code=code if version >= 7 else 0, session_id=request.session_id,
               responses=topics)


# Kafka's getErrorResponse per API key, for the APIs served here.
def _create_topics(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.create_topics import error_response
    return error_response(request, code)


def _delete_topics(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.delete_topics import error_response
    return error_response(request, version, code)


def _create_partitions(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.create_partitions import error_response
    return error_response(request, code)


def _elect_leaders(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.elect_leaders import error_response
    return error_response(request, version, code)


def _alter_partition_reassignments(cls: type, request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.alter_partition_reassignments import error_response
    return error_response(request, code)


def _per_resource(cls: type, request: Any, version: int, code: int) -> Any:
    """A result per config resource asked for (Describe/Alter/IncrementalAlterConfigs)."""
    from kraftpy.controller.api import alter_configs, describe_configs, incremental_alter_configs
    module = {32: describe_configs, 33: alter_configs, 44: incremental_alter_configs}
    return module[cls.API_KEY].error_response(request, code)


BUILDERS: dict[int, Builder] = {
    1: _fetch,
    3: _metadata,
    10: _find_coordinator,
    17: _top_level,  # SaslHandshake
    18: _api_versions,
    22: _init_producer_id,
    29: _with_api_error,  # DescribeAcls
    30: _create_acls,
    31: _delete_acls,
    36: _with_api_error,  # SaslAuthenticate
    52: _top_level,  # Vote: VoteResponse with the top-level error only
    53: _top_level,  # BeginQuorumEpoch
    54: _top_level,  # EndQuorumEpoch
    55: _describe_quorum,
    57: _with_api_error,  # UpdateFeatures: top-level ErrorCode and ErrorMessage
    59: _top_level,  # FetchSnapshot: FetchSnapshotResponse.withTopLevelError
    60: _with_api_error,  # DescribeCluster
    61: _describe_producers,
    62: _broker_registration,
    63: _broker_heartbeat,
    64: _with_api_error,  # UnregisterBroker
    65: _describe_transactions,
    66: _top_level,  # ListTransactions
    67: _top_level,  # AllocateProducerIds
    70: _describe_quorum,  # ControllerRegistration: top-level error with Errors' message
    19: _create_topics,
    20: _delete_topics,
    32: _per_resource,  # DescribeConfigs
    33: _per_resource,  # AlterConfigs
    37: _create_partitions,
    44: _per_resource,  # IncrementalAlterConfigs
    43: _elect_leaders,
    45: _alter_partition_reassignments,
    46: _with_api_error,  # ListPartitionReassignments
    56: _top_level,  # AlterPartition
    58: _top_level,  # Envelope
    73: _top_level,  # AssignReplicasToDirs
    80: _with_api_error,  # AddRaftVoter: ErrorCode and ErrorMessage
    81: _with_api_error,  # RemoveRaftVoter
    82: _top_level,  # UpdateRaftVoter: ErrorCode only (CurrentLeader at its defaults)
}


def generic(cls: type, request: Any, version: int, code: int) -> Any:
    """The top-level ErrorCode, for an API without its own builder."""
    for spec in cls._FIELDS:
        if spec.attr == "error_code" and spec.present(version):
            return cls(error_code=code)
    raise LookupError(f"{cls.__name__} v{version} has no top-level ErrorCode")


def error_response(api_key: int, request: Any, version: int,
                   code: int = ErrorCode.UNKNOWN_SERVER_ERROR) -> Any:
    """The response of `api_key` at `version` that answers `request` with `code` alone.

    LookupError when the API has neither a builder here nor a top-level ErrorCode."""
    cls = API_KEYS[api_key].response
    return BUILDERS.get(api_key, generic)(cls, request, version, code)
