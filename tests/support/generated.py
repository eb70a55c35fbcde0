"""Every generated codec class, for tests that sweep all classes and versions."""

from __future__ import annotations

import importlib
import pkgutil

from kraftpy.protocol import messages, records
from kraftpy.protocol.message import Message


def generated_classes(*, top_only: bool = False) -> list[type[Message]]:
    """Classes of protocol/messages and protocol/records; `top_only`: one per schema (its
    message, last in the module's __all__), not the nested structs."""
    out: list[type[Message]] = []
    for package in (messages, records):
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            names = module.__all__[-1:] if top_only else module.__all__
            out.extend(getattr(module, name) for name in names)
    return out


def versions(cls: type[Message]) -> range:
    return range(cls.VALID_VERSIONS[0], cls.VALID_VERSIONS[1] + 1)
