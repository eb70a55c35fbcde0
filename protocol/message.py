"""The base of every generated message, header and record class.

Generated modules supply, per class, `_DECODERS` / `_ENCODERS` (version -> offset-based
function), `_JSON` (version -> JsonConverter dict builder), for the top-level class `_BYTES`
(version -> one-pack encoder of fixed layouts) and `_FIELDS` (what the generic
to_json, ==, repr and tests need to know about each field);
the behaviour shared by all of them lives here once.
"""

from __future__ import annotations

import base64
import struct
import uuid
from base64 import b64encode
from binascii import b2a_base64
from typing import Any, ClassVar

from kraftpy.protocol.errors import DecodeError, EncodeError
from kraftpy.protocol.primitives import AbsentFieldError, OffsetConstruct
from kraftpy.protocol.uuid import kafka_uuid_str

_MAX = 0x7FFF


class FieldSpec:
    """One field of a generated class, as the schema declares it."""

    __slots__ = ("name", "attr", "json", "kind", "elem", "struct", "versions", "nullable",
                 "tagged", "tag", "default", "ignorable")

    def __init__(self, name: str, attr: str, kind: str, elem: str | None, struct: Any,
                 versions: tuple[int, int], nullable: tuple[int, int] | None,
                 tagged: tuple[int, int] | None, tag: int | None, default: Any,
                 ignorable: bool):
        self.name = name
        self.attr = attr
        self.json = name[:1].lower() + name[1:]
        self.kind = kind  # primitive name, "array" or "struct"
        self.elem = elem  # element kind of an array ("struct" for arrays of structs)
        self.struct = struct  # the class of a struct or of an array's elements
        self.versions = versions
        self.nullable = nullable
        self.tagged = tagged
        self.tag = tag
        self.default = default
        self.ignorable = ignorable

    def present(self, version: int) -> bool:
        return self.versions[0] <= version <= self.versions[1]

    def is_tagged(self, version: int) -> bool:
        return self.tagged is not None and self.tagged[0] <= version <= self.tagged[1]

    def is_nullable(self, version: int) -> bool:
        return self.nullable is not None and self.nullable[0] <= version <= self.nullable[1]

    def make_default(self) -> Any:
        d = self.default
        if d == "struct":
            return self.struct()
        if d == "uuid0":
            return uuid.UUID(int=0)
        if isinstance(d, list):
            return []
        return d

    def is_default(self, value: Any) -> bool:
        d = self.default
        if d == "struct":
            return value == self.struct()
        if d == "uuid0":
            return value == uuid.UUID(int=0)
        if isinstance(d, list):
            return value == []
        if d is None:
            return value is None
        return value == d

    def __repr__(self) -> str:
        return f"FieldSpec({self.name})"


class Message:
    """Fields of all versions in one object; codecs per version."""

    __slots__ = ()
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, 0)
    FLEXIBLE_VERSIONS: ClassVar[tuple[int, int] | None] = None
    SCHEMA_NAME: ClassVar[str] = ""
    _FIELDS: ClassVar[tuple[FieldSpec, ...]] = ()
    _DECODERS: ClassVar[dict[int, Any]] = {}
    _ENCODERS: ClassVar[dict[int, Any]] = {}
    _JSON: ClassVar[dict[int, Any]] = {}
    _BYTES: ClassVar[dict[int, Any]] = {}  # version -> o -> bytes | None (fixed layouts)
    _CONSTRUCTS: ClassVar[dict[int, OffsetConstruct]]

    # --- codecs ---------------------------------------------------------------------------

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, version: int) -> Any:
        """Decode the whole buffer; trailing bytes are an error."""
        if type(data) is not bytes:
            data = bytes(data)
        try:
            fn = cls._DECODERS[version]
        except (KeyError, TypeError):
            raise DecodeError(f"{cls.__name__} has no version {version!r}") from None
        obj, end = fn(data, 0)
        if end != len(data):
            raise DecodeError(f"{len(data) - end} trailing bytes after {cls.__name__} v{version}",
                              offset=end)
        return obj

    @classmethod
    def decode_from(cls, data: bytes | bytearray | memoryview, offset: int, version: int) -> tuple[Any, int]:
        """Decode one object starting at `offset`; returns it and the offset after it."""
        if type(data) is not bytes:
            data = bytes(data)
        try:
            fn = cls._DECODERS[version]
        except (KeyError, TypeError):
            raise DecodeError(f"{cls.__name__} has no version {version!r}") from None
        if not 0 <= offset <= len(data):
            raise DecodeError("offset outside the buffer", offset=offset)
        return fn(data, offset)

    @classmethod
    def decoder(cls, version: int) -> Any:
        """The generated `(data: bytes, offset) -> (obj, end)` of one version, for a caller that
        resolves it once and checks the offset and trailing bytes itself (the server's routes).
        Offsets in its DecodeErrors count from the start of `data`."""
        try:
            return cls._DECODERS[version]
        except (KeyError, TypeError):
            raise DecodeError(f"{cls.__name__} has no version {version!r}") from None

    def encode(self, version: int) -> bytes:
        data = self.encode_fixed(version)
        if data is not None:
            return data
        parts: list[bytes] = []
        self.encode_into(parts.append, version)
        return b"".join(parts)

    def encode_fixed(self, version: int) -> bytes | None:
        """The encoding in one pack when this version's fields are all fixed-size and untagged
        and nothing stands in the way; None sends the caller to `encode_into`, which writes
        unknown tagged fields or raises the error that says why."""
        try:
            fn = self._BYTES.get(version)
            return None if fn is None else fn(self)
        except Exception:  # the checked path raises it again, as EncodeError
            return None

    def encode_into(self, append: Any, version: int) -> None:
        """Append the encoded pieces to a list (framing joins once)."""
        try:
            fn = self._ENCODERS[version]
        except (KeyError, TypeError):
            raise EncodeError(f"{type(self).__name__} has no version {version!r}") from None
        try:
            fn(self, append)
        except AbsentFieldError as exc:
            raise EncodeError(f"Attempted to write a non-default {exc.field} at version {version} "
                              f"of {type(self).__name__}") from None
        except EncodeError:
            raise
        except (struct.error, AttributeError, TypeError, ValueError, OverflowError) as exc:
            raise EncodeError(f"cannot encode {type(self).__name__} v{version}: {exc}") from None

    @classmethod
    def construct(cls, version: int) -> OffsetConstruct:
        """The construct of this class at one version (parses to and builds from instances)."""
        cache = cls.__dict__.get("_CONSTRUCTS")
        if cache is None:
            cache = {}
            cls._CONSTRUCTS = cache
        con = cache.get(version)
        if con is None:
            if version not in cls._DECODERS:
                raise EncodeError(f"{cls.__name__} has no version {version!r}")
            con = OffsetConstruct(cls._DECODERS[version], lambda obj: obj.encode(version),
                                  f"{cls.__name__}v{version}")
            cache[version] = con
        return con

    # --- views ------------------------------------------------------------------------------

    def to_json(self, version: int) -> dict[str, Any]:
        """The layout of Kafka's generated JsonConverter for this version."""
        fn = self._JSON.get(version)
        if fn is not None:
            return fn(self)
        return generic_to_json(self, version)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__
                          if s != "unknown_tagged_fields" or getattr(self, s))
        return f"{type(self).__name__}({inner})"


def generic_to_json(obj: Message, version: int) -> dict[str, Any]:
    """to_json read off the field specs: versions without a generated converter, and tests."""
    out: dict[str, Any] = {}
    for f in obj._FIELDS:
        if not f.present(version):
            continue
        value = getattr(obj, f.attr)
        if f.is_tagged(version) and f.is_default(value):
            continue
        out[f.json] = _json_value(f.kind, f.elem, value, version)
    return out


def json_bytes(value: bytes | bytearray | memoryview | None) -> str | None:
    """Bytes as JsonConverter writes them: standard base64."""
    if value is None:
        return None
    return b64encode(value).decode("ascii")


_URLSAFE = bytes.maketrans(b"+/", b"-_")


def json_uuid(value: uuid.UUID | None) -> str | None:
    """A uuid as JsonConverter writes it: Kafka's base64url text, unpadded."""
    if value is None:
        return None
    return b2a_base64(value.bytes, newline=False)[:22].translate(_URLSAFE).decode("ascii")


def _json_value(kind: str, elem: str | None, value: Any, version: int) -> Any:
    if value is None:
        return None
    if kind == "uuid":
        return kafka_uuid_str(value)
    if kind in ("bytes", "records"):
        return base64.b64encode(bytes(value)).decode("ascii")
    if kind == "struct":
        return generic_to_json(value, version)
    if kind == "array":
        return [_json_value(elem or "", None, v, version) for v in value]
    return value
