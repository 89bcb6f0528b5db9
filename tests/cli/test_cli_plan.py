"""``hylo-analytics plan``: from assumptions and from runs, text and JSON, one-line errors."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics.cli import main
from hylo_analytics.stats.power import (
    discordance_from_marginals,
    minimum_detectable_effect,
    pairs_for_power,
    pairs_for_power_continuous,
)

DOC = Path(__file__).resolve().parents[2] / "docs" / "planning.md"


def _doc_examples(*, store: bool = False) -> list[tuple[str, str]]:
    """(command, output) of each ``$ hylo-analytics plan`` in docs/planning.md (on a store?)."""
    blocks = re.findall(r"```console\n(.*?)```", DOC.read_text(), flags=re.S)
    found = []
    for block in blocks:
        for chunk in block.split("$ hylo-analytics plan ")[1:]:
            command, _, output = chunk.partition("\n")
            if ("--store" in command) == store:
                found.append((command, output))
    return found


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["plan", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_from_a_rate_and_a_correlation(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--parent-rate", "0.95", "--delta", "0.03", "--rho", "0.3"], capsys)
    n = pairs_for_power(0.03, discordance_from_marginals(0.95, 0.98, 0.3))
    assert code == 0
    assert out.splitlines()[0].startswith("Discordance 0.0497 from success rates 0.95")
    assert f"with power 0.80 at one-sided alpha 0.05 (Tango score test): {n} pairs" in out


def test_json_from_a_discordance(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--discordance", "0.06", "--delta", "0.03", "--two-sided", "--pairs", "400"]
    code, out, _ = _run([*argv, "--format", "json"], capsys)
    data = json.loads(out)
    assert code == 0 and data["kind"] == "binary"
    assert data["plan"]["n_pairs"] == pairs_for_power(0.03, 0.06, alternative="two-sided")
    assert data["plan"]["alternative"] == "two-sided"
    assert data["at_pairs"]["mde"] == pytest.approx(
        minimum_detectable_effect(400, 0.06, alternative="two-sided")
    )
    assert 0 < data["at_pairs"]["power"] < 0.8


def test_continuous(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(["--sd", "12", "--delta", "2"], capsys)
    assert code == 0
    assert f"(paired t-test): {pairs_for_power_continuous(2.0, 12.0)} pairs" in out


def test_from_runs(sample_store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--store", str(sample_store.root), "--candidate", "version=1.2.0-rc1"]
    argv += ["--parent", "version=1.0.0", "--delta", "0.05"]
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert "191 pairs, 65 candidate wins, 12 parent wins (discordance 0.403 observed)" in out
    assert f"{pairs_for_power(0.05, 77 / 191):,} pairs (episodes per run)" in out
    code, out, _ = _run([*argv, "--format", "json"], capsys)
    data = json.loads(out)
    assert (data["mode"], data["n_pairs"], data["plan"]["delta"]) == ("runs", 191, 0.05)


def test_help_shows_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["plan", "--help"])
    assert exit_.value.code == 0
    assert "hylo-analytics plan --parent-rate 0.95 --delta 0.03" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--delta", "0.03"], "give --parent-rate P"),
        (["--parent-rate", "0.99", "--delta", "0.03"], "outside [0, 1]"),
        (["--discordance", "0.02", "--delta", "0.03"], "exceeds the discordance"),
        (["--discordance", "0.06"], "give --delta"),
        (["--sd", "12", "--rho", "0.3", "--delta", "2"], "--sd plans a continuous metric"),
        (["--candidate", "a", "--parent", "b"], "need --store"),
        (["--parent-rate", "0.5", "--delta", "0.1", "--power", "1.5"], "power"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("hylo-analytics plan: error: ")
    assert needle in err


def test_store_needs_both_runs(sample_store: ha.Store, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(["--store", str(sample_store.root), "--candidate", "x"], capsys)
    assert code == 2 and "--store needs --candidate RUN and --parent RUN" in err


@pytest.mark.parametrize(("command", "output"), _doc_examples())
def test_the_doc_prints_what_the_command_prints(
    command: str, output: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(shlex.split(command), capsys)
    assert (code, out) == (0, output)


def test_a_missing_store_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "typo"
    code, _, err = _run(["--store", str(store), "--candidate", "a", "--parent", "b"], capsys)
    assert code == 2 and f"no store at {store}" in err
    assert not store.exists()


@pytest.mark.slow
def test_the_doc_libero_example(
    real_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ((command, output),) = _doc_examples(store=True)
    ha.open_store(tmp_path / "s").ingest(real_dir / "vla-eval-harness", progress=False)
    argv = [str(tmp_path / "s") if a == "STORE" else a for a in shlex.split(command)]
    code, out, _ = _run(argv, capsys)
    assert (code, out) == (0, output)
