"""Our generator is general: it compiles every schema kafka-python bundles (Kafka 4.1 era), and
the modules it makes agree byte for byte with kio."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.codegen import render_dir
from support.kio_oracle import kio_class, kio_encode, kio_reads_back


def _resources() -> Path:
    kafka = pytest.importorskip("kafka")
    return Path(os.path.dirname(kafka.__file__)) / "protocol" / "schemas" / "resources"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ModuleType]:
    out = tmp_path_factory.mktemp("kp_generated")
    modules = {}
    for name, source in render_dir(_resources()).items():
        if name == "__init__.py":
            continue
        path = out / name
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(f"kp_generated_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        modules[path.stem] = module
    return modules


def test_every_bundled_schema_compiles(compiled: dict[str, ModuleType]) -> None:
    jsons = sorted(_resources().glob("*.json"))
    assert len(jsons) >= 100
    assert len(compiled) == len(jsons)
    for module in compiled.values():
        top = getattr(module, module.__all__[-1])
        lo, hi = top.VALID_VERSIONS
        assert set(top._DECODERS) == set(range(lo, hi + 1))


def test_bundled_messages_agree_with_kio(compiled: dict[str, ModuleType]) -> None:
    checked = 0
    for module in compiled.values():
        cls = getattr(module, module.__all__[-1])
        lo, hi = cls.VALID_VERSIONS
        for version in range(lo, hi + 1):
            kcls = kio_class(cls, version)
            if kcls is None:
                continue

            _agree(cls, kcls, version)
            checked += 1
    assert checked >= 480


def _agree(cls: type, kcls: type, version: int) -> None:
    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(kcls))
    def check(value: object) -> None:
        data = kio_encode(kcls, value)
        ours = cls.decode(data, version)
        assert ours.encode(version) == data
        assert kio_reads_back(kcls, ours.encode(version), value)

    check()
