"""kio (an independent Kafka codec) as an oracle: its classes for our (class, version) pairs."""

from __future__ import annotations

import io
from typing import Any

from hypothesis import strategies as st

_ready = False


def _setup() -> None:
    global _ready
    if not _ready:
        from kio.static.primitive import Records

        st.register_type_strategy(Records, st.binary(max_size=16))
        _ready = True


def kio_class(our_cls: type, version: int) -> type | None:
    """kio's class for one of ours at a version, or None when kio does not have it."""
    from kio.index import KioIndexError, load_entity_module, load_payload_module
    from kio.static.constants import EntityType
    from kraftpy.codegen.schema import snake_case as to_snake_case

    _setup()
    name = our_cls.__name__
    try:
        if name.endswith("Request") and our_cls.API_KEY is not None:
            module = load_payload_module(our_cls.API_KEY, version, EntityType.request)
        elif name.endswith("Response") and our_cls.API_KEY is not None:
            module = load_payload_module(our_cls.API_KEY, version, EntityType.response)
        elif name in ("RequestHeader", "ResponseHeader"):
            module = load_entity_module(to_snake_case(name), version, EntityType.header)
        else:
            module = load_entity_module(to_snake_case(name), version, EntityType.data)
    except (KioIndexError, ImportError, KeyError):
        return None
    return getattr(module, name, None)


def kio_encode(kio_cls: type, value: Any) -> bytes:
    from kio.serial import entity_writer

    buf = io.BytesIO()
    entity_writer(kio_cls)(buf, value)
    return buf.getvalue()


def kio_decode(kio_cls: type, data: bytes) -> Any:
    from kio.serial import entity_reader

    value, size = entity_reader(kio_cls)(data, 0)
    assert size == len(data), f"kio read {size} of {len(data)} bytes"
    return value


def kio_decode_or_none(kio_cls: type, data: bytes) -> Any:
    """kio's reading of bytes kio itself wrote, or None where kio cannot read its own output
    (its i64 durations beyond Python's timedelta range): nothing to compare there."""
    try:
        return kio_decode(kio_cls, data)
    except OverflowError:
        return None
    except ValueError as exc:
        if "timedelta" in str(exc):
            return None
        raise


def kio_reads_back(kio_cls: type, data: bytes, value: Any) -> bool:
    """Whether kio reads `data` as `value` (or cannot read it at all; see above). Values that
    differ only in how a datetime is zoned count as the same when kio writes them to the same
    bytes: an aware datetime inside a daylight-saving fold never equals one in another zone
    (PEP 495), though both name the same millisecond on the wire."""
    back = kio_decode_or_none(kio_cls, data)
    return back is None or back == value or kio_encode(kio_cls, back) == kio_encode(kio_cls, value)
