"""Kafka's config rules over the tables of `kafka_configs.py`: parsing, validation, effective values.

A topic config is checked as Kafka's controller checks it (ControllerConfigurationValidator ->
LogConfig.validate): every name must be a LogConfig name ("Unknown topic config name: x"),
then the topic's whole config, over the broker-level values behind it, is parsed in
definition order with ConfigDef's types and validators (the first failure is the answer, in
ConfigException's words), then the cross-key rules (compaction lags, tiered storage, which is
never enabled here). The effective value of a topic key comes from the first of: the topic's
own config, this node's dynamic broker config, the cluster's dynamic default, the static
properties, Kafka's default (KafkaConfigSchema.resolveEffectiveTopicConfig).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kraftpy.controller.kafka_configs import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    _Key,
)

# ConfigResource.Type ids.
TOPIC, BROKER = 2, 4
# DescribeConfigsResponse.ConfigSource ids.
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
# DescribeConfigsResponse.ConfigType ids, by ConfigDef type.
CONFIG_TYPES = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6,
                "LIST": 7, "CLASS": 8, "PASSWORD": 9}

_INT_RANGES = {"INT": (-2**31, 2**31 - 1), "SHORT": (-2**15, 2**15 - 1),
               "LONG": (-2**63, 2**63 - 1)}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[dDfF]?")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
_CONVERT = {"same": 1, "minutes": 60_000, "hours": 3_600_000}


class ConfigError(ValueError):
    """A config Kafka refuses; the message is Kafka's (sent as INVALID_CONFIG)."""


def _invalid(name: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"Invalid value {_java_str(value)} for configuration {name}: {why}")


def _java_str(value: Any) -> str:
    """How Java's toString prints a parsed value (lists as [a, b], booleans lowercase)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]"
    if isinstance(value, float):
        return repr(value).replace("inf", "Infinity")
    return str(value)


def parse(name: str, value: str, key: _Key) -> Any:
    """ConfigDef.parseType then the key's validator: the typed value, or ConfigError."""
    trimmed = value.strip()
    kind = key.type
    if kind == "BOOLEAN":
        if trimmed.lower() not in ("true", "false"):
            raise _invalid(name, value, "Expected value to be either true or false")
        parsed: Any = trimmed.lower() == "true"
    elif kind in _INT_RANGES:
        lo, hi = _INT_RANGES[kind]
        if not _JAVA_INT.fullmatch(trimmed) or not lo <= int(trimmed) <= hi:
            raise _invalid(name, value, f"Not a number of type {kind}")
        parsed = int(trimmed)
    elif kind == "DOUBLE":
        if not _JAVA_DOUBLE.fullmatch(trimmed):
            raise _invalid(name, value, "Not a number of type DOUBLE")
        parsed = float(trimmed.rstrip("dDfF"))
    elif kind == "LIST":
        parsed = [] if not trimmed else _LIST_SPLIT.split(trimmed)
    else:  # STRING, PASSWORD, CLASS (a class name: kept as text, never loaded here)
        parsed = trimmed
    if key.validator is not None:
        _check(name, parsed, key.validator)
    return parsed


def _check(name: str, value: Any, validator: str) -> None:
    """Apply the validator Kafka describes as `validator` (ConfigDef's validators' toString)."""
    if validator.startswith("[partitionId]"):  # ThrottledReplicaListValidator
        items = [v.strip() for v in value]
        if not (all(_REPLICA.fullmatch(v) for v in items) or "".join(items) == "*"):
            raise _invalid(name, value, f"{name} must be the literal '*' or a list of replicas in "
                           "the following format: [partitionId]:[brokerId],[partitionId]:"
                           "[brokerId],...")
        return
    level = re.fullmatch(r"\[(-?\d+),\.\.\.,(-?\d+)\] or (-?\d+)", validator)
    if level:  # compression level: a range, or the codec's default
        lo, hi, default = (int(g) for g in level.groups())
        if value > hi or (value < lo and value != default):
            raise _invalid(name, value, f"Value must be between {lo} and {hi} or equal to "
                           f"{default}")
        return
    bounds = re.fullmatch(r"\[([-0-9.E]+),\.\.\.(?:,([-0-9.E]+))?\]", validator)
    if bounds:  # ConfigDef.Range
        lo_text, hi_text = bounds.groups()
        if value < float(lo_text):
            raise _invalid(name, value, f"Value must be at least {lo_text}")
        if hi_text is not None and value > float(hi_text):
            raise _invalid(name, value, f"Value must be no more than {hi_text}")
        return
    choice = re.fullmatch(r"(\(case insensitive\) )?\[(.*)\]", validator)
    if choice:  # ValidString / ValidList / CaseInsensitiveValidString
        insensitive, options = choice.groups()
        valid = options.split(", ")
        for item in value if isinstance(value, list) else [value]:
            if insensitive and item.upper() not in (v.upper() for v in valid):
                raise _invalid(name, item, "String must be one of (case insensitive): "
                               + ", ".join(valid))
            if not insensitive and item not in valid:
                raise _invalid(name, item, "String must be one of: " + ", ".join(valid))
        return
    if validator in ("non-empty string", "non-empty list") and not value:
        raise _invalid(name, value, "String must be non-empty")


def to_text(value: Any, kind: str) -> str:
    """ConfigDef.convertToString of a parsed value."""
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "DOUBLE":
        return _java_str(float(value))
    return str(value)


def normalized(name: str, value: str) -> str:
    """A topic value as Kafka's LogConfig prints it back (trimmed, lists re-joined)."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        return value
    try:
        return to_text(parse(name, value, key), key.type)
    except ConfigError:
        return value


# --- topics ---------------------------------------------------------------------------------


def validate_topic(configs: Mapping[str, str | None], existing: Mapping[str, str],
                   broker_values: Mapping[str, str]) -> None:
    """LogConfig.validate of a topic's whole new config; raises ConfigError."""
    nulls = [k for k, v in configs.items() if v is None]
    if nulls:
        raise ConfigError("Null value not supported for topic configs: " + ",".join(nulls))
    for name in configs:
        if name not in TOPIC_CONFIGS:
            raise ConfigError(f"Unknown topic config name: {name}")
    values: dict[str, Any] = {}
    for name, key in TOPIC_CONFIGS.items():
        raw = configs.get(name)
        if raw is None:
            raw = broker_values.get(name, key.default)
        values[name] = None if raw is None else parse(name, raw, key)
    low, high = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if low > high:
        raise ConfigError(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                          f"max.compaction.lag.ms ({high})")
    if values["remote.storage.enable"]:
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot "
                          "be configured with remote log storage.")
    if str(existing.get("remote.storage.enable", "false")).strip().lower() == "true" \
            and not values["remote.log.delete.on.disable"]:
        raise ConfigError(
            "It is invalid to disable remote storage without deleting remote data. If you want "
            "to keep the remote data and turn to read only, please set `remote.storage.enable="
            "true,remote.log.copy.disable=true`. If you want to disable remote storage and "
            "delete all remote data, please set `remote.storage.enable=false,remote.log.delete."
            "on.disable=true`.")


@dataclass(frozen=True)
class ConfigEntry:
    """One effective config: its value as text (None for a sensitive or unset one)."""

    name: str
    value: str | None
    source: int
    sensitive: bool
    type: int
    synonyms: tuple[tuple[str, str | None, int], ...] = ()  # (name, value, source)


@dataclass(frozen=True)
class BrokerLayers:
    """The broker-level config layers behind topic configs, most specific first."""

    node: Mapping[str, str]  # this node's dynamic config (BROKER resource "<node id>")
    cluster: Mapping[str, str]  # the cluster's dynamic default (BROKER resource "")
    static: Mapping[str, str]  # the node's properties

    def layers(self) -> tuple[tuple[Mapping[str, str], int], ...]:
        return ((self.node, DYNAMIC_BROKER_CONFIG), (self.cluster, DYNAMIC_DEFAULT_BROKER_CONFIG),
                (self.static, STATIC_BROKER_CONFIG))

    def topic_value(self, name: str) -> tuple[str | None, int]:
        """The broker-level value behind topic key `name`, converted to its unit, and its
        source (DEFAULT_CONFIG with Kafka's default when no layer sets it)."""
        synonyms = TOPIC_SYNONYMS.get(name, ())
        for layer, source in self.layers():
            for synonym, unit in synonyms:
                if synonym in layer:
                    return _convert(layer[synonym], unit), source
        return TOPIC_CONFIGS[name].default, DEFAULT_CONFIG

    def topic_values(self) -> dict[str, str]:
        """Every topic key's broker-level value (what LogConfig is built over)."""
        out = {}
        for name in TOPIC_CONFIGS:
            value, _ = self.topic_value(name)
            if value is not None:
                out[name] = value
        return out


def _convert(value: str, unit: str) -> str:
    if unit == "same":
        return value
    try:
        return str(int(value.strip()) * _CONVERT[unit])
    except ValueError:
        return value


def effective_topic_configs(topic: Mapping[str, str], broker: BrokerLayers) -> list[ConfigEntry]:
    """Every topic config's effective value and source, as the controller puts them in a
    CreateTopics answer (internal keys only when the topic sets them), sorted by name."""
    out = []
    for name, key in TOPIC_CONFIGS.items():
        if key.internal and name not in topic:
            continue
        if name in topic:
            value, source = topic[name], TOPIC_CONFIG
        else:
            value, source = broker.topic_value(name)
        sensitive = key.type == "PASSWORD"
        out.append(ConfigEntry(name, None if sensitive else value, source, sensitive,
                               CONFIG_TYPES.get(key.type, 0)))
    out.sort(key=lambda e: e.name)
    return out


def described_topic_configs(topic: Mapping[str, str], broker: BrokerLayers) -> list[ConfigEntry]:
    """A topic's configs as DescribeConfigs shows them (ConfigHelper.createTopicConfigEntry):
    values normalized, synonyms from the topic, then each broker layer, then Kafka's defaults,
    dropped up to the first broker synonym's own name as Kafka drops them."""
    out = []
    for name, key in TOPIC_CONFIGS.items():
        if key.internal and name not in topic:
            continue
        sensitive = key.type == "PASSWORD"
        raw = topic[name] if name in topic else broker.topic_value(name)[0]
        value = None if sensitive or raw is None else normalized(name, raw)
        synonyms: list[tuple[str, str | None, int]] = []
        broker_names = [s for s, _ in TOPIC_SYNONYMS.get(name, ())]
        if broker_names:
            for layer, source in (*broker.layers(), (_BROKER_DEFAULTS, DEFAULT_CONFIG)):
                synonyms += [(s, None if sensitive else layer[s], source)
                             for s in broker_names if s in layer]
            while synonyms and synonyms[0][0] != broker_names[0]:
                synonyms.pop(0)
        if name in topic:
            synonyms.insert(0, (name, value, TOPIC_CONFIG))
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, source, sensitive, CONFIG_TYPES.get(key.type, 0),
                               tuple(synonyms)))
    return out


_BROKER_DEFAULTS = {n: k.default for n, k in BROKER_CONFIGS.items() if k.default is not None}


# --- brokers --------------------------------------------------------------------------------


def broker_name_error(name: str) -> str | None:
    """Why a BROKER resource name is refused (ControllerConfigurationValidator), or None."""
    if not name:
        return None
    try:
        broker_id = int(name, 10) if re.fullmatch(r"[+-]?[0-9]+", name) else None
    except ValueError:
        broker_id = None
    if broker_id is None or not -2**31 <= broker_id < 2**31:
        return "Unable to parse broker name as a base 10 number."
    if broker_id < 0:
        return "Invalid negative broker ID."
    return None


def validate_broker_configs(configs: Mapping[str, str | None]) -> None:
    """What a broker checks before it forwards a dynamic broker config change: known dynamic
    keys (DynamicBrokerConfig) with values of their type; raises ConfigError."""
    for name, value in configs.items():
        key = BROKER_CONFIGS.get(name)
        if key is None or name not in DYNAMIC_BROKER_CONFIGS:
            raise ConfigError(f"Cannot update these configs dynamically: Set({name})")
        if value is not None:
            parse(name, value, key)


def described_broker_configs(names: Iterable[str], layers: BrokerLayers, per_broker: bool
                             ) -> list[ConfigEntry]:
    """Broker configs as DescribeConfigs shows them (ConfigHelper.createBrokerConfigEntry):
    for the cluster default only its dynamic layer counts."""
    out = []
    for name in names:
        key = BROKER_CONFIGS.get(name)
        kind = key.type if key else "STRING"
        sensitive = kind == "PASSWORD"
        synonyms: list[tuple[str, str | None, int]] = []
        for layer, source in (*layers.layers(), (_BROKER_DEFAULTS, DEFAULT_CONFIG)):
            if name in layer and (per_broker or source == DYNAMIC_DEFAULT_BROKER_CONFIG):
                synonyms.append((name, None if sensitive else layer[name], source))
        value = None if sensitive else (synonyms[0][1] if synonyms else None)
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, source, sensitive, CONFIG_TYPES.get(kind, 0),
                               tuple(synonyms)))
    return out


def is_read_only_broker_config(name: str) -> bool:
    return name not in DYNAMIC_BROKER_CONFIGS


def is_list(resource_type: int, name: str) -> bool:
    """KafkaConfigSchema.isSplittable: APPEND / SUBTRACT work only on LIST keys."""
    table = TOPIC_CONFIGS if resource_type == TOPIC else BROKER_CONFIGS
    key = table.get(name)
    return key is not None and key.type == "LIST"


def default_text(resource_type: int, name: str) -> str | None:
    table = TOPIC_CONFIGS if resource_type == TOPIC else BROKER_CONFIGS
    key = table.get(name)
    return None if key is None else key.default
