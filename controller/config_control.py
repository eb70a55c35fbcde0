"""ConfigurationControlManager: dynamic configs of topics, brokers and the cluster (ConfigRecords).

State is one dict of key -> value per (resource type, resource name), changed only by
replaying ConfigRecords (a null value deletes the key; a topic's configs go with its
RemoveTopicRecord). Changes are computed as Kafka's controller computes them
(ConfigurationControlManager.incrementalAlterConfig / legacyAlterConfigs): one ConfigRecord per
key whose value changes (for brokers, per key named, changed or not, so brokers reload), the
resource's whole new config validated before anything is written, and with ELR enabled a
ClearElrRecord after each min.insync.replicas change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kraftpy.controller import config_schema as schema
from kraftpy.controller.config_schema import BROKER, TOPIC, BrokerLayers, ConfigError
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.records.clear_elr_record import ClearElrRecord
from kraftpy.protocol.records.config_record import ConfigRecord

# IncrementalAlterConfigs operations (AlterConfigOp.OpType).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
MIN_IN_SYNC_REPLICAS = "min.insync.replicas"
MAX_VALUE_SIZE = 32767

Resource = tuple[int, str]
ApiError = tuple[int, str | None]  # (error code, message)
NONE: ApiError = (ErrorCode.NONE, None)


class ConfigurationControlManager:
    def __init__(self, node_id: int, static_configs: Mapping[str, str],
                 elr_enabled: Callable[[], bool],
                 missing: Callable[[Resource], ApiError | None]) -> None:
        self.node_id = node_id
        self.static = dict(static_configs)
        self.elr_enabled = elr_enabled
        self.missing = missing  # why an existing resource is not there (the existence check)
        self.data: dict[Resource, dict[str, str]] = {}
        self._records: dict[tuple[int, str, str], ConfigRecord] = {}  # for snapshots, in order

    # --- replay ---------------------------------------------------------------------------

    def replay(self, record: ConfigRecord) -> None:
        resource = (record.resource_type, record.resource_name)
        configs = self.data.setdefault(resource, {})
        key = (record.resource_type, record.resource_name, record.name)
        if record.value is None:
            configs.pop(record.name, None)
            self._records.pop(key, None)
        else:
            configs[record.name] = record.value
            self._records[key] = record
        if not configs:
            del self.data[resource]

    def delete_topic_configs(self, name: str) -> None:
        """A RemoveTopicRecord takes the topic's configs with it (as Kafka's replay does)."""
        for key in list(self.data.pop((TOPIC, name), {})):
            self._records.pop((TOPIC, name, key), None)

    @property
    def records(self) -> Mapping[tuple[int, str, str], ConfigRecord]:
        """The ConfigRecords in force, keyed (resource type, resource name, key)."""
        return self._records

    def snapshot_records(self) -> list[tuple[Any, int]]:
        return [(r, 0) for r in self._records.values()]

    # --- queries --------------------------------------------------------------------------

    def configs(self, resource: Resource) -> dict[str, str]:
        return dict(self.data.get(resource, {}))

    def broker_layers(self) -> BrokerLayers:
        return BrokerLayers(node=self.data.get((BROKER, str(self.node_id)), {}),
                            cluster=self.data.get((BROKER, ""), {}), static=self.static)

    def effective_topic_configs(self, creation: Mapping[str, str]) -> list[schema.ConfigEntry]:
        return schema.effective_topic_configs(creation, self.broker_layers())

    # --- changes --------------------------------------------------------------------------

    def incremental_alter(self, resource: Resource, ops: Mapping[str, tuple[int, str | None]],
                          newly_created: bool, records: list[tuple[Any, int]]) -> ApiError:
        """One resource's IncrementalAlterConfigs: its records go to `records` only if the
        whole change is valid."""
        current = self.data.get(resource, {})
        new_records = []
        for key, (op, value) in ops.items():
            old = current.get(key)
            new = old
            if op == SET:
                new = value
            elif op == DELETE:
                new = None
            elif op in (APPEND, SUBTRACT):
                if not schema.is_list(resource[0], key):
                    verb = "APPEND" if op == APPEND else "SUBTRACT"
                    return (ErrorCode.INVALID_CONFIG,
                            f"Can't {verb} to key {key} because its type is not LIST.")
                parts = _parts(new if new is not None else schema.default_text(resource[0], key))
                for item in (value or "").split(","):
                    if op == APPEND and item not in parts:
                        parts.append(item)
                    elif op == SUBTRACT and item in parts:
                        parts.remove(item)
                new = ",".join(parts)
            else:
                return (ErrorCode.INVALID_REQUEST, f"Unknown alter configs operation {op}")
            if new != old or resource[0] == BROKER:
                new_records.append(_record(resource, key, new))
        error = self._validate(resource, new_records, [], newly_created)
        if error[0] == ErrorCode.NONE:
            records.extend((r, 0) for r in new_records)
        return error

    def legacy_alter(self, resource: Resource, configs: Mapping[str, str | None],
                     records: list[tuple[Any, int]]) -> ApiError:
        """One resource's AlterConfigs: the given keys set, every other key deleted."""
        current = self.data.get(resource, {})
        altered = [_record(resource, k, v) for k, v in configs.items()
                   if current.get(k) != v or resource[0] == BROKER]
        deleted = [_record(resource, k, None) for k in current if k not in configs]
        error = self._validate(resource, altered, deleted, False)
        if error[0] == ErrorCode.NONE:
            records.extend((r, 0) for r in altered + deleted)
        return error

    def clear_elr_records(self, records: list[tuple[Any, int]]) -> list[tuple[Any, int]]:
        """ClearElrRecords for the min.insync.replicas changes among `records` (ELR on)."""
        if not self.elr_enabled():
            return []
        out: list[tuple[Any, int]] = []
        for record, _ in records:
            if record.API_KEY == ConfigRecord.API_KEY and record.name == MIN_IN_SYNC_REPLICAS:
                if record.resource_type == TOPIC:
                    out.append((ClearElrRecord(topic_name=record.resource_name), 0))
                else:
                    out.append((ClearElrRecord(), 0))
        return out

    def _validate(self, resource: Resource, altered: list[ConfigRecord],
                  deleted: list[ConfigRecord], newly_created: bool) -> ApiError:
        kind, name = resource
        existing = self.data.get(resource, {})
        merged: dict[str, str | None] = dict(existing)
        for record in altered:
            if record.name == MIN_IN_SYNC_REPLICAS and kind == BROKER and self.elr_enabled():
                if name:
                    return (ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot "
                            "be altered while ELR is enabled.")
                if record.value is None:
                    return (ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot "
                            "be removed while ELR is enabled.")
            if record.value is None:
                merged.pop(record.name, None)
            elif len(record.value) > MAX_VALUE_SIZE:
                return (ErrorCode.INVALID_CONFIG, "The configuration value cannot be added "
                        "because it exceeds the maximum value size of 32767 bytes.")
            else:
                merged[record.name] = record.value
        for record in deleted:
            if record.name == MIN_IN_SYNC_REPLICAS and kind == BROKER and not name \
                    and self.elr_enabled():
                return (ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot "
                        "be removed while ELR is enabled.")
            merged.pop(record.name, None)
        error = resource_error(resource)
        if error is not None:
            return error
        try:
            if kind == TOPIC:
                schema.validate_topic(merged, existing, self.broker_layers().topic_values())
        except ConfigError as exc:
            return (ErrorCode.INVALID_CONFIG, str(exc))
        if not newly_created:
            return self.missing(resource) or NONE
        return NONE


def resource_error(resource: Resource) -> ApiError | None:
    """ControllerConfigurationValidator.validate(resource): the resource itself, or None."""
    kind, name = resource
    if kind == TOPIC:
        if not name:
            return (ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        from kraftpy.controller.topic_names import topic_name_error
        why = topic_name_error(name)
        return None if why is None else (ErrorCode.INVALID_TOPIC_EXCEPTION, why)
    if kind == BROKER:
        why = schema.broker_name_error(name)
        return None if why is None else (ErrorCode.INVALID_REQUEST, why)
    return (ErrorCode.INVALID_REQUEST, f"Unknown resource type {_type_name(kind)}")


def _type_name(kind: int) -> str:
    return {0: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
            32: "GROUP"}.get(kind, "UNKNOWN")


def _record(resource: Resource, key: str, value: str | None) -> ConfigRecord:
    return ConfigRecord(resource_type=resource[0], resource_name=resource[1], name=key,
                        value=value)


def _parts(value: str | None) -> list[str]:
    return [p for p in (value or "").split(",") if p]
