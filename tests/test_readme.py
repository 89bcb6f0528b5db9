"""The README's code blocks run, top to bottom, as a user would type them.

Every fenced block after the two commands runs in one fresh folder holding ``data/sample``:
``python`` blocks in one namespace, ``bash`` blocks in bash (``set -euo pipefail``) with this
venv's scripts first on ``PATH``, and every ``yaml`` block is written first to the file its
first line names (``# scorers.yaml``). The two commands themselves are checked against what
CI runs: the first installs the light set and runs the demo, the second is CI's test command.
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


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    line: int


def _blocks() -> list[Block]:
    text = README.read_text()
    return [
        Block(m["lang"], textwrap.dedent(m["body"]), text.count("\n", 0, m.start()) + 1)
        for m in _FENCE.finditer(text)
    ]


def test_every_block_has_a_known_language() -> None:
    blocks = _blocks()
    assert len(blocks) > 10
    assert {b.lang for b in blocks} <= {"bash", "python", "yaml"}
    for b in blocks:
        if b.lang == "yaml":
            assert re.match(r"# [\w.-]+\.yaml\b", b.body), f"README.md:{b.line}: name the file"


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
            exec(compile(b.body, f"README.md:{b.line}", "exec"), namespace)
        elif b.lang == "bash":
            res = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", b.body],
                cwd=tmp_path, env=env, capture_output=True, text=True,
            )  # fmt: skip
            assert res.returncode == 0, f"README.md:{b.line}:\n{b.body}\n{res.stderr[-2000:]}"
        else:
            continue
        ran += 1
    assert ran >= 10

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
