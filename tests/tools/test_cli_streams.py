"""Commands print to the streams of the moment they run, not of the moment their module was
imported: a default argument bound to `sys.stdout` at import keeps writing to a stream that
may have been replaced since (a test's capture, an embedding program's redirect)."""

from __future__ import annotations

import importlib
import inspect
import io
import pkgutil

import kraftpy.tools


def _tool_modules():
    for info in pkgutil.walk_packages(kraftpy.tools.__path__, "kraftpy.tools."):
        if ".spark" in info.name or info.name.endswith("__main__"):
            continue  # needs the spark extra; its entry points take explicit streams
        try:
            yield importlib.import_module(info.name)
        except ImportError:
            continue


def test_no_function_binds_a_stream_at_import() -> None:
    bound = []
    for module in _tool_modules():
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ != module.__name__:
                continue
            for p in inspect.signature(fn).parameters.values():
                if isinstance(p.default, io.IOBase | io.TextIOBase) or hasattr(p.default, "write"):
                    bound.append(f"{module.__name__}.{name}({p.name})")
    assert bound == []


def test_dump_log_writes_to_the_stdout_of_the_call(tmp_path, capsys) -> None:
    from kraftpy.tools import dump_log

    missing = tmp_path / "nothing-here.log"
    assert dump_log.main([str(missing)]) != 0
    assert "kraftpy dump-log" in capsys.readouterr().err
