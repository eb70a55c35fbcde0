"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs over the controller's state.

DescribeConfigs answers as Kafka's ConfigHelper does on a controller: a topic shows every
LogConfig key with its effective value and source (its own config, then this node's and the
cluster's dynamic broker configs, the node's properties, Kafka's defaults), the cluster
default (BROKER "") its dynamic configs, this node (BROKER "<node id>") every broker key. The
alters follow ControllerApis: unknown resource types answer UNSUPPORTED_VERSION, a resource
named twice INVALID_REQUEST, the rest go through ConfigurationControlManager; validateOnly
writes nothing. A change to this node's own broker configs on the client listener is checked
as a broker checks it before forwarding (known dynamic keys, typed values).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import config_schema as schema
from kraftpy.controller.config_control import DELETE, SUBTRACT, resource_error
from kraftpy.controller.config_schema import BROKER, TOPIC, ConfigError
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.topic_names import topic_name_error
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse as OldResourceResponse,
)
from kraftpy.protocol.messages.alter_configs_response import AlterConfigsResponse
from kraftpy.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from kraftpy.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

BROKER_LOGGER = 8
KNOWN_TYPES = frozenset({TOPIC, BROKER, BROKER_LOGGER, 16, 32})  # + CLIENT_METRICS, GROUP


# --- DescribeConfigs --------------------------------------------------------------------------


def describe_configs(qc: Any, request: Any, api_version: int, listener: str | None
                     ) -> ControllerResult:
    results = [_describe(qc, r, request.include_synonyms,
                         api_version >= 3 and request.include_documentation)
               for r in request.resources]
    return ControllerResult.reply(DescribeConfigsResponse(throttle_time_ms=0, results=results))


def _describe(qc: Any, resource: Any, synonyms: bool, documentation: bool
              ) -> DescribeConfigsResult:
    kind, name = resource.resource_type, resource.resource_name
    result = DescribeConfigsResult(error_code=ErrorCode.NONE, error_message=None,
                                   resource_type=kind, resource_name=name, configs=[])
    control = qc.config_control
    node = str(qc.settings.node_id)
    if kind == TOPIC:
        why = topic_name_error(name)
        if why is not None:
            return _describe_error(result, ErrorCode.INVALID_TOPIC_EXCEPTION, why)
        if name not in qc.replication.topics_by_name:
            result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            return result
        entries = schema.described_topic_configs(control.configs((TOPIC, name)),
                                                 control.broker_layers())
        read_only = False
    elif kind == BROKER:
        layers = control.broker_layers()
        if not name:
            entries = schema.described_broker_configs(sorted(layers.cluster), layers, False)
        elif _broker_id(name) is None:
            return _describe_error(result, ErrorCode.INVALID_REQUEST,
                                   f"Broker id must be an integer, but it is: {name}")
        elif _broker_id(name) == qc.settings.node_id:
            names = list(schema.BROKER_CONFIGS)
            names += sorted(set(layers.static) - set(schema.BROKER_CONFIGS))
            entries = schema.described_broker_configs(names, layers, True)
        else:
            return _describe_error(result, ErrorCode.INVALID_REQUEST,
                                   f"Unexpected broker id, expected {node} or empty string, "
                                   f"but received {name}")
        read_only = None
    elif kind == BROKER_LOGGER:
        if not name:
            return _describe_error(result, ErrorCode.INVALID_REQUEST,
                                   "Broker id must not be empty")
        if _broker_id(name) != qc.settings.node_id:
            return _describe_error(result, ErrorCode.INVALID_REQUEST,
                                   f"Unexpected broker id, expected {node} but received {name}")
        return result  # kraftpy's loggers are not Kafka's log4j loggers: none to show
    else:
        return _describe_error(result, ErrorCode.INVALID_REQUEST,
                               f"Unsupported resource type: {_type_name(kind)}")
    wanted = resource.configuration_keys
    for e in entries:
        if wanted and e.name not in wanted:
            continue
        result.configs.append(DescribeConfigsResourceResult(
            name=e.name, value=e.value,
            read_only=schema.is_read_only_broker_config(e.name) if read_only is None
            else read_only,
            config_source=e.source, is_sensitive=e.sensitive,
            synonyms=[DescribeConfigsSynonym(name=n, value=v, source=s)
                      for n, v, s in e.synonyms] if synonyms else [],
            config_type=e.type, documentation=None))
    return result


def _describe_error(result: DescribeConfigsResult, code: int, message: str
                    ) -> DescribeConfigsResult:
    result.error_code, result.error_message = code, message
    return result


def _broker_id(name: str) -> int | None:
    try:
        return int(name)
    except ValueError:
        return None


def _type_name(kind: int) -> str:
    return {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
            32: "GROUP"}.get(kind, "UNKNOWN")


# --- AlterConfigs / IncrementalAlterConfigs ----------------------------------------------------


def incremental_alter_configs(qc: Any, request: Any, api_version: int, listener: str | None
                              ) -> ControllerResult:
    response = IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[])
    changes = _collect(request, response.responses, AlterConfigsResourceResponse,
                       lambda r: {c.name: (c.config_operation, c.value) for c in r.configs})
    records: list[tuple[Any, int]] = []
    for (kind, name), ops in changes.items():
        error = _unsupported(kind, name, ops, listener, qc)
        if error is None:
            bad = next((op for op, _ in ops.values() if not 0 <= op <= SUBTRACT), None)
            if bad is not None:
                error = (ErrorCode.INVALID_REQUEST, f"Unknown alter configs operation {bad}")
        if error is None:
            mine: list[tuple[Any, int]] = []
            error = qc.config_control.incremental_alter((kind, name), ops, False, mine)
            records += mine
        response.responses.append(AlterConfigsResourceResponse(
            error_code=error[0], error_message=error[1], resource_type=kind,
            resource_name=name))
    return _result(qc, response, records, request.validate_only)


def alter_configs(qc: Any, request: Any, api_version: int, listener: str | None
                  ) -> ControllerResult:
    response = AlterConfigsResponse(throttle_time_ms=0, responses=[])
    changes = _collect(request, response.responses, OldResourceResponse,
                       lambda r: {c.name: c.value for c in r.configs})
    records: list[tuple[Any, int]] = []
    for (kind, name), configs in changes.items():
        ops = {k: (0, v) for k, v in configs.items()}
        error = _unsupported(kind, name, ops, listener, qc)
        if error is None:
            mine: list[tuple[Any, int]] = []
            error = qc.config_control.legacy_alter((kind, name), configs, mine)
            records += mine
        response.responses.append(OldResourceResponse(
            error_code=error[0], error_message=error[1], resource_type=kind,
            resource_name=name))
    return _result(qc, response, records, request.validate_only)


def _collect(request: Any, out: list[Any], answer: type, configs_of: Any
             ) -> dict[tuple[int, str], Any]:
    """The resources to change, keyed (type, name); unknown types and duplicates answered."""
    changes: dict[tuple[int, str], Any] = {}
    duplicates: set[tuple[int, str]] = set()
    for r in request.resources:
        key = (r.resource_type, r.resource_name)
        if r.resource_type not in KNOWN_TYPES:
            out.append(answer(error_code=ErrorCode.UNSUPPORTED_VERSION,
                              error_message=f"Unknown resource type {r.resource_type}.",
                              resource_type=r.resource_type, resource_name=r.resource_name))
        elif key not in duplicates:
            if key in changes:
                del changes[key]
                duplicates.add(key)
                out.append(answer(error_code=ErrorCode.INVALID_REQUEST,
                                  error_message="Duplicate resource.",
                                  resource_type=r.resource_type, resource_name=r.resource_name))
            else:
                changes[key] = configs_of(r)
    return changes


def _unsupported(kind: int, name: str, ops: dict[str, tuple[int, str | None]],
                 listener: str | None, qc: Any) -> tuple[int, str | None] | None:
    """What this node refuses before the configuration manager sees the change."""
    if kind not in (TOPIC, BROKER):
        return resource_error((kind, name))
    error = resource_error((kind, name))
    if error is not None:
        return error
    if kind == BROKER and name == str(qc.settings.node_id) and listener is not None \
            and listener not in qc.settings.controller_listener_names:
        try:  # what a broker checks of its own configs before it forwards the change
            schema.validate_broker_configs({k: (None if op in (DELETE, SUBTRACT) else v)
                                            for k, (op, v) in ops.items()})
        except ConfigError as exc:
            return (ErrorCode.INVALID_REQUEST, str(exc))
    return None


def _result(qc: Any, response: Any, records: list[tuple[Any, int]], validate_only: bool
            ) -> ControllerResult:
    if validate_only or not records:
        return ControllerResult.reply(response)
    records += qc.config_control.clear_elr_records(records)
    return ControllerResult(response, records=records)
