"""Hypothesis strategies for kraftpy's generated message classes, driven by their field specs.

`message_strategy(cls, version)` draws instances holding only what `version` can carry (other
fields keep their defaults), so encode -> decode must give back an equal object.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

_INTS = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}
UNKNOWN_TAG_BASE = 1000  # far above any tag Kafka's schemas use


def _scalar(kind: str, size: int) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return st.text(max_size=size)
    if kind in ("bytes", "records"):
        return st.binary(max_size=size)
    if kind == "uuid":
        return st.uuids()
    raise AssertionError(kind)


def message_strategy(cls: type, version: int, *, unknown_tags: bool = False, size: int = 3,
                     depth: int = 0) -> st.SearchStrategy[Any]:
    flexible = cls.FLEXIBLE_VERSIONS is not None and version >= cls.FLEXIBLE_VERSIONS[0]
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for f in cls._FIELDS:
        if not f.present(version):
            continue
        if f.kind == "struct":
            s = message_strategy(f.struct, version, unknown_tags=unknown_tags, size=size, depth=depth + 1)
        elif f.kind == "array":
            if f.elem == "struct":
                el = message_strategy(f.struct, version, unknown_tags=unknown_tags, size=size,
                                      depth=depth + 1)
            else:
                el = _scalar(f.elem, 8)
            s = st.lists(el, max_size=max(0, size - depth))
        else:
            s = _scalar(f.kind, 12)
        if f.is_nullable(version):
            s = st.none() | s
        fields[f.attr] = s
    if unknown_tags and flexible:
        fields["unknown_tagged_fields"] = st.dictionaries(
            st.integers(UNKNOWN_TAG_BASE, UNKNOWN_TAG_BASE + 200), st.binary(max_size=6), max_size=2)
    return st.fixed_dictionaries(fields).map(lambda kw: cls(**kw))
