"""Every package folder is installed under `kraftpy`, so a plain (non-editable) install works."""

from __future__ import annotations

import tomllib

from support.paths import PROJECT


def test_every_package_folder_is_listed() -> None:
    config = tomllib.loads((PROJECT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    roots = {folder: name for name, folder in config["package-dir"].items()}
    found = set()
    for folder, name in roots.items():
        for init in (PROJECT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(PROJECT / folder)
            found.add(".".join([name, *rel.parts]) if rel.parts else name)
    found = {n for n in found if "__pycache__" not in n}
    assert found == listed
