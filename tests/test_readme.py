"""The code blocks of the README and of the guide run, top to bottom, as a user would type them.

The README is the front door (the two commands and a tour); the manual is the guide's chapters,
``docs/guide/NN-*.md``, read in the order of their numbers after the README, as one session.
Every fenced block after the two commands runs in one fresh folder holding ``data/sample``:
``python`` blocks in one namespace, ``bash`` blocks in bash (``set -euo pipefail``) with this
venv's scripts first on ``PATH``, and every ``yaml`` block is written first to the file its
first line names (``# scorers.yaml``). The two commands themselves are checked against what
CI runs: the first installs the light set and runs the demo, the second is CI's test command. Every
relative link of the README and of ``docs/`` resolves (the file, and a ``#fragment``'s heading).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import hylo_analytics as ha

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w+)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
# the blocks the README held when the manual moved to docs/guide (20): none may stop running
_BLOCKS_BEFORE_THE_GUIDE = 20


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    where: str  # page:line


def _pages() -> list[Path]:
    """The README, then the guide's chapters in reading order."""
    return [README, *sorted((REPO / "docs" / "guide").glob("[0-9][0-9]-*.md"))]


def _blocks() -> list[Block]:
    out = []
    for page in _pages():
        text, name = page.read_text(), page.relative_to(REPO).as_posix()
        out += [
            Block(
                m["lang"],
                textwrap.dedent(m["body"]),
                f"{name}:{text.count(chr(10), 0, m.start()) + 1}",
            )
            for m in _FENCE.finditer(text)
        ]
    return out


def test_every_block_has_a_known_language() -> None:
    blocks = _blocks()
    assert len(blocks) >= _BLOCKS_BEFORE_THE_GUIDE
    assert {b.lang for b in blocks} <= {"bash", "python", "yaml"}
    for b in blocks:
        if b.lang == "yaml":
            assert re.match(r"# [\w.-]+\.yaml\b", b.body), f"{b.where}: name the file"


def test_the_two_commands_are_what_ci_runs() -> None:
    setup, tests = _blocks()[:2]
    assert setup.body.strip() == (
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/hylo-analytics demo"
    )  # the light set: no extras
    ci = (REPO / ".ci" / "run").read_text()
    install, pytest_cmd = tests.body.strip().split(" && ")
    assert install == '.venv/bin/pip install -q -e ".[dev]"'
    assert '.venv/bin/python -m pip install -q -e ".[dev]"' in ci
    assert pytest_cmd in ci.splitlines()
    # the demo itself runs in tests/cli/test_cli.py; CI also runs it from the built wheel
    assert 'hylo-analytics" demo' in ci


@pytest.mark.slow
def test_readme_runs_top_to_bottom(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "sample").symlink_to(REPO / "data" / "sample")
    monkeypatch.chdir(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    blocks = _blocks()[2:]
    for b in blocks:
        if b.lang == "yaml":
            (tmp_path / b.body.split()[1]).write_text(b.body)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    ran = 0
    for b in blocks:
        if b.lang == "python":
            exec(compile(b.body, b.where, "exec"), namespace)
        elif b.lang == "bash":
            res = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", b.body],
                cwd=tmp_path, env=env, capture_output=True, text=True,
            )  # fmt: skip
            assert res.returncode == 0, f"{b.where}:\n{b.body}\n{res.stderr[-2000:]}"
        else:
            continue
        ran += 1
    assert ran >= _BLOCKS_BEFORE_THE_GUIDE - 2 - 2  # all but the two commands and two yaml files

    # what the snippets did: nothing rejected, no scorer error, every file they name written
    store = ha.open_store(tmp_path / "out" / "store", create=False)
    assert store.sql("select count(*) from quarantine").item() == 0
    assert store.sql("select count(*) from runs").item() == 3
    errors = store.sql(
        "select count(*) from scores where skip_reason like 'missing path%' "
        "or skip_reason like 'not %'"
    ).item()
    assert errors == 0
    declared = store.sql(
        "select count(distinct metric) from scores where metric in "
        "('episode_steps', 'reached_goal', 'status_agrees', 'has_success')"
    ).item()
    assert declared == 4
    for name in ("ts.csv", "out/log/evallog.json", "report.html"):
        assert (tmp_path / name).stat().st_size > 0, name


_LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as -."""
    heads = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_link_of_the_readme_and_the_docs_resolves() -> None:
    pages = [README, *sorted((REPO / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for m in _LINK.finditer(page.read_text()):
            target = m["target"]
            if re.match(r"[a-z]+:", target):  # http(s), mailto: not ours to check offline
                continue
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in _anchors(dest):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
