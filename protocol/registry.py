"""API keys and metadata record types, from the generated classes.

The tables are built by walking the generated packages, so adding a schema and regenerating is
all it takes for a new API or record type to be known here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass

from kraftpy.protocol import messages, records
from kraftpy.protocol.message import Message

API_VERSIONS_KEY = 18
CONTROLLED_SHUTDOWN_KEY = 7


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    name: str  # "InitProducerId"
    request: type[Message]
    response: type[Message]
    valid_versions: tuple[int, int]
    flexible_versions: tuple[int, int] | None
    listeners: frozenset[str]
    latest_version_unstable: bool

    def is_flexible(self, version: int) -> bool:
        flex = self.flexible_versions
        return flex is not None and version >= flex[0]


def _classes(package: object) -> list[type[Message]]:
    out = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):  # type: ignore[attr-defined]
        module = importlib.import_module(f"{package.__name__}.{info.name}")  # type: ignore[attr-defined]
        for name in getattr(module, "__all__", ()):
            cls = getattr(module, name)
            if cls.SCHEMA_NAME == name and getattr(cls, "API_KEY", None) is not None and \
                    name == module.__all__[-1]:
                out.append(cls)
    return out


def _build() -> tuple[dict[int, ApiSpec], dict[int, type[Message]], dict[str, type[Message]]]:
    requests: dict[int, type[Message]] = {}
    responses: dict[int, type[Message]] = {}
    for cls in _classes(messages):
        name = cls.__name__
        if name.endswith("Request"):
            requests[cls.API_KEY] = cls
        elif name.endswith("Response"):
            responses[cls.API_KEY] = cls
    apis = {}
    for key in sorted(requests):
        req, resp = requests[key], responses[key]
        apis[key] = ApiSpec(
            api_key=key, name=req.__name__[: -len("Request")], request=req, response=resp,
            valid_versions=req.VALID_VERSIONS, flexible_versions=req.FLEXIBLE_VERSIONS,
            listeners=frozenset(req.LISTENERS), latest_version_unstable=req.LATEST_VERSION_UNSTABLE,
        )
    metadata: dict[int, type[Message]] = {}
    by_name: dict[str, type[Message]] = {}
    for cls in _classes(records):
        by_name[cls.__name__] = cls
        if cls.__module__.rsplit(".", 1)[-1].startswith("transaction_log"):
            continue
        metadata[cls.API_KEY] = cls
    return apis, dict(sorted(metadata.items())), by_name


API_KEYS, METADATA_RECORDS, _BY_NAME = _build()


def to_snake_case(name: str) -> str:
    """Kafka's MessageGenerator.toSnakeCase: an underscore before a capital that ends a lower run."""
    out = []
    prev_upper = True
    for ch in name:
        if ch.isupper():
            if not prev_upper:
                out.append("_")
            out.append(ch.lower())
            prev_upper = True
        else:
            out.append(ch)
            prev_upper = False
    return "".join(out)


def record_type_name(record_type: int) -> str:
    """The MetadataRecordType enum name, e.g. 15 -> "PRODUCER_IDS_RECORD"."""
    cls = METADATA_RECORDS.get(record_type)
    if cls is None:
        raise KeyError(f"unknown metadata record type {record_type}")
    return to_snake_case(cls.__name__).upper()


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for flexible versions, else 1 (0 only for ControlledShutdown v0)."""
    if api_key == CONTROLLED_SHUTDOWN_KEY and api_version == 0:
        return 0
    spec = API_KEYS.get(api_key)
    return 2 if spec is not None and spec.is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for flexible versions, else 0; ApiVersions always 0 (KIP-511)."""
    if api_key == API_VERSIONS_KEY:
        return 0
    spec = API_KEYS.get(api_key)
    return 1 if spec is not None and spec.is_flexible(api_version) else 0
