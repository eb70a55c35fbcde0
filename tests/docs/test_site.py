"""The documentation site builds with warnings as errors, and its shell examples run.

The conventions are docs/index.md's ("Examples that run") and `support/doc_examples.py`'s.
The getting-started page, whose examples start a cluster with real brokers, runs in
tests/tools/test_cluster_command.py, which shares that one cluster with its own checks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.doc_examples import CLUSTER_PAGE, ROOT, PageRun, blocks, examples, pages

# Info strings a fenced block may have: `sh` runs, the others are shown.
KNOWN = {"sh", "text", "properties", "python", "json", "yaml"}


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir",
                           str(tmp_path / "site")], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path,  # paths are the config's, not the cwd's
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    design = (tmp_path / "site" / "design" / "index.html").read_text()
    assert "The way a request travels" in design  # DESIGN.md's text, included
    not_done = (tmp_path / "site" / "not-done" / "index.html").read_text()
    assert "client connection: blocking" in not_done  # DESIGN.md's list, to its last item


def test_every_block_says_whether_it_runs() -> None:
    unknown = [f"{page.relative_to(ROOT)}:{line} ```{info}" for page in pages()
               for line, info, _ in blocks(page) if info not in KNOWN]
    assert unknown == [], "use ```sh for an example that runs, ```text for one that does not"


@pytest.mark.parametrize("page", [p for p in pages() if examples(p) and p != CLUSTER_PAGE],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_examples_run(page: Path, tmp_path: Path,
                                request: pytest.FixtureRequest) -> None:
    # A page that runs Kafka's tools (kraftpy-cluster/bin) runs them from the suite's jars.
    libs = request.getfixturevalue("kafka_jars") if "kraftpy-cluster/bin" in page.read_text() \
        else None
    run = PageRun(tmp_path, kafka_libs=libs)
    try:
        for example in examples(page):
            run.run(example)
    finally:
        stopped = run.stop()
    assert [code for _, code in stopped] == [0] * len(stopped), run.background_tails()


def test_a_failing_example_fails_and_names_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```sh\ntrue\n```\n\n```text\nnot run\n```\n\n```sh\nfalse\n```\n")
    first, second = examples(page)
    run = PageRun(tmp_path / "run")
    run.run(first)
    with pytest.raises(AssertionError, match=re.escape(f"{page}:11") + " exited 1"):
        run.run(second)


def test_the_readme_keeps_its_first_two_commands_and_links_the_site() -> None:
    readme = (ROOT / "README.md").read_text()
    assert readme.splitlines()[2:4] == ["    pip install . && kraftpy serve",
                                        "    pip install -e '.[test,spark]' && python3 -m pytest"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install -e '.[test,spark]' && python3 -m pytest" in ci
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links and all((ROOT / link).is_file() for link in links), links
