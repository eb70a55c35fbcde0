"""Kafka's message-schema dialect, read into a small model the emitter walks.

The dialect is loose (// comments, tags and defaults given as strings or numbers, fields
with only taggedVersions, shared commonStructs, field-level flexibleVersions), so every quirk
is settled here once and the emitter sees one regular shape.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path

MAX_VERSION = 0x7FFF
FIXED_SIZES = {"bool": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
               "int64": 8, "float64": 8, "uuid": 16}
STRUCT_CODES = {"bool": "?", "int8": "b", "int16": "h", "uint16": "H", "int32": "i",
                "uint32": "I", "int64": "q", "float64": "d", "uuid": "16s"}
PRIMITIVES = set(FIXED_SIZES) | {"string", "bytes", "records"}
NULLABLE_KINDS = {"string", "bytes", "records", "uuid", "array", "struct"}


class SchemaError(ValueError):
    """A schema file that does not follow Kafka's dialect."""


@dataclass(frozen=True)
class Versions:
    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str | int | None) -> Versions:
        if text is None or text == "none":
            return NONE
        text = str(text).strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: int) -> bool:
        return self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.lo, other.lo), min(self.hi, other.hi))

    def as_tuple(self) -> tuple[int, int] | None:
        return None if self.empty else (self.lo, self.hi)


NONE = Versions(1, 0)


def snake_case(name: str) -> str:
    """Kafka's field name as a Python attribute (the rule DESIGN.md fixes)."""
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return out + "_" if keyword.iskeyword(out) else out


def lower_camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def strip_comments(text: str) -> str:
    """Drop // comments outside string literals (Kafka's parser allows them)."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


@dataclass
class FieldType:
    kind: str  # a primitive name, "array" or "struct"
    elem: FieldType | None = None
    struct: str | None = None

    @property
    def fixed(self) -> bool:
        return self.kind in FIXED_SIZES

    def __str__(self) -> str:
        if self.kind == "array":
            return f"[]{self.elem}"
        return self.struct if self.kind == "struct" else self.kind


@dataclass
class Field:
    name: str
    type: FieldType
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object  # the Python value (None for null); lists/structs are made fresh
    ignorable: bool
    flexible: Versions | None  # field-level override (strings and bytes only)
    map_key: bool
    entity_type: str | None

    @property
    def attr(self) -> str:
        return snake_case(self.name)

    @property
    def json_name(self) -> str:
        return lower_camel(self.name)


@dataclass
class Struct:
    name: str
    fields: list[Field]
    versions: Versions


@dataclass
class MessageSpec:
    name: str
    type: str
    api_key: int | None
    valid: Versions
    flexible: Versions
    listeners: list[str]
    latest_unstable: bool
    top: Struct
    structs: dict[str, Struct] = field(default_factory=dict)  # every struct, in definition order
    source: str = ""

    @property
    def module(self) -> str:
        return snake_case(self.name).rstrip("_")


def _int(value: object) -> int:
    if isinstance(value, bool):
        raise SchemaError(f"not an integer: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)


def _default(ftype: FieldType, raw: object, nullable_all: bool) -> object:
    if raw is not None and str(raw) == "null":
        if not nullable_all:
            raise SchemaError("a null default needs the field nullable in all versions")
        return None
    kind = ftype.kind
    if raw is None or raw == "":
        if kind == "bool":
            return False
        if kind == "float64":
            return 0.0
        if kind == "string":
            return ""
        if kind == "bytes":
            return b""
        if kind == "records":
            return None
        if kind == "uuid":
            return "uuid0"
        if kind == "array":
            return []
        if kind == "struct":
            return "struct"
        return 0
    if kind == "bool":
        text = str(raw).lower()
        if text not in ("true", "false"):
            raise SchemaError(f"bad bool default {raw!r}")
        return text == "true"
    if kind == "float64":
        return float(raw)
    if kind == "string":
        return str(raw)
    if kind in FIXED_SIZES and kind != "uuid":
        return _int(raw)
    raise SchemaError(f"a default of {raw!r} is not allowed for {ftype}")


class SchemaLoader:
    """Reads one schema file into a MessageSpec."""

    def __init__(self, path: Path):
        self.path = path
        try:
            self.raw = json.loads(strip_comments(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise SchemaError(f"{path}: {exc}") from exc
        self.structs: dict[str, Struct] = {}
        self.common: dict[str, dict] = {c["name"]: c for c in self.raw.get("commonStructs", [])}

    def load(self) -> MessageSpec:
        raw = self.raw
        try:
            valid = Versions.parse(raw["validVersions"])
            flexible = Versions.parse(raw.get("flexibleVersions", "none"))
            name = raw["name"]
            kind = raw["type"]
        except KeyError as exc:
            raise SchemaError(f"{self.path}: missing {exc}") from exc
        top = Struct(name, self._fields(raw.get("fields", []), valid, name), valid)
        spec = MessageSpec(
            name=name, type=kind,
            api_key=_int(raw["apiKey"]) if "apiKey" in raw else None,
            valid=valid, flexible=flexible, listeners=list(raw.get("listeners", [])),
            latest_unstable=bool(raw.get("latestVersionUnstable", False)),
            top=top, structs=self.structs, source=self.path.name,
        )
        for cname in self.common:  # common structs nobody referenced still get a class
            if cname not in self.structs:
                self._common(cname)
        return spec

    def _common(self, name: str) -> Struct:
        node = self.common[name]
        versions = Versions.parse(node.get("versions", "0+"))
        struct = Struct(name, [], versions)
        self.structs[name] = struct
        struct.fields = self._fields(node.get("fields", []), versions, name)
        return struct

    def _struct_for(self, node: dict, type_name: str, versions: Versions) -> str:
        if "fields" in node:
            if type_name in self.structs or type_name in self.common:
                existing = self.structs.get(type_name)
                if existing is None:
                    existing = self._common(type_name)
                return type_name  # Kafka reuses the name; the first definition stands
            struct = Struct(type_name, [], versions)
            self.structs[type_name] = struct
            struct.fields = self._fields(node["fields"], versions, type_name)
            return type_name
        if type_name in self.structs:
            return type_name
        if type_name in self.common:
            return self._common(type_name).name
        raise SchemaError(f"{self.path}: unknown type {type_name!r}")

    def _type(self, node: dict, versions: Versions) -> FieldType:
        text = node["type"]
        if text.startswith("[]"):
            inner = text[2:]
            if inner in PRIMITIVES:
                if inner == "records":
                    raise SchemaError("arrays of records are not allowed")
                return FieldType("array", FieldType(inner))
            return FieldType("array", FieldType("struct", struct=self._struct_for(node, inner, versions)))
        if text in PRIMITIVES:
            return FieldType(text)
        return FieldType("struct", struct=self._struct_for(node, text, versions))

    def _fields(self, nodes: list[dict], parent: Versions, owner: str) -> list[Field]:
        out = []
        seen = set()
        for node in nodes:
            name = node.get("name", "")
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", name):
                raise SchemaError(f"{self.path}: bad field name {name!r} in {owner}")
            if name in seen:
                raise SchemaError(f"{self.path}: duplicate field {name} in {owner}")
            seen.add(name)
            tagged = Versions.parse(node.get("taggedVersions"))
            versions = Versions.parse(node["versions"]) if "versions" in node else tagged
            if versions.empty and tagged.empty:
                raise SchemaError(f"{self.path}: field {name} has no versions")
            ftype = self._type(node, versions)
            nullable = Versions.parse(node.get("nullableVersions"))
            kind = ftype.kind
            if not nullable.empty and kind not in NULLABLE_KINDS:
                raise SchemaError(f"{self.path}: {name}: {kind} cannot be nullable")
            nullable_all = not nullable.empty and nullable.lo <= versions.lo and nullable.hi >= versions.hi
            tag = node.get("tag")
            if tag is not None:
                tag = _int(tag)
                if tag < 0:
                    raise SchemaError(f"{self.path}: {name}: negative tag")
            if (tag is None) != tagged.empty:
                raise SchemaError(f"{self.path}: {name}: tag and taggedVersions go together")
            flex = node.get("flexibleVersions")
            out.append(Field(
                name=name, type=ftype, versions=versions, nullable=nullable, tagged=tagged,
                tag=tag, default=_default(ftype, node.get("default"), nullable_all),
                ignorable=bool(node.get("ignorable", False)),
                flexible=Versions.parse(flex) if flex is not None else None,
                map_key=bool(node.get("mapKey", False)), entity_type=node.get("entityType"),
            ))
        return out


def load_schema(path: Path) -> MessageSpec:
    return SchemaLoader(Path(path)).load()
