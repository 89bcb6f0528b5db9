"""Hostile names through the CLI: control characters printed escaped, log text never a format
string, CSV cells a spreadsheet would run neutralised (issue 28, items 3b-3d)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import hylo_analytics as ha
from hylo_analytics._text import json_printable, printable, spreadsheet_safe
from hylo_analytics.cli import main

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
# an OSC title change ended by BEL, a screen clear, a C1 CSI, DEL and a bidi override
PARENT = "-par\x1b]0;pwned\x07ent{}"
CAND = "@cand\x1b[2J{0}%s\x9b\x7f\u202e"
RAW = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e")


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two sample runs renamed hostile; their benchmark digests (which differ) and split hold
    format placeholders of every kind."""
    root = tmp_path_factory.mktemp("hostile")
    for src, rid, digest in (
        ("run-octo-ft-1.0.0-0000", PARENT, "sha256:{}{0}%s"),
        ("run-octo-ft-1.1.0-0001", CAND, "sha256:%(x)s{name}"),
    ):
        log = json.loads((SAMPLE / src / "evallog.json").read_text())
        log["run_id"] = rid
        log["agent"]["name"] = f'=HYPERLINK("http://x","{rid}")'
        log["benchmark"]["digest"] = digest
        log["benchmark"]["split"] = "held{}out%s"
        for s in log["samples"]:
            s.pop("trace", None)
        (root / "logs" / src).mkdir(parents=True)
        (root / "logs" / src / "evallog.json").write_text(json.dumps(log))
    store = ha.open_store(root / "store")
    store.ingest(root / "logs", progress=False)
    return root / "store"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    for raw in RAW:
        assert raw not in out and raw not in err, f"raw {raw!r} printed by {argv[0]}"
    return code, out, err


def test_the_escapers() -> None:
    assert printable("a\x1b]0;t\x07b\x9b\x7f\u202ec\n") == "a\\x1b]0;t\\x07b\\x9b\\x7f\\u202ec\\n"
    assert printable("täsk/ピック 1") == "täsk/ピック 1"
    assert json.loads(json_printable(json.dumps(CAND, ensure_ascii=False))) == CAND
    cells = ["=1+1", "+A1", "-2+3", "@SUM(A1)", "\tx", "\rx", "-0.5", "+1", "1e-3", "a=b", ""]
    assert [spreadsheet_safe(c) for c in cells] == [
        "'=1+1", "'+A1", "'-2+3", "'@SUM(A1)", "'\tx", "'\rx", "-0.5", "+1", "1e-3", "a=b", "",
    ]  # fmt: skip


@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_runs_prints_names_escaped(
    hostile_store: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["runs", "--store", str(hostile_store), "--format", fmt], capsys)
    assert code == 0
    if fmt == "json":  # the same data, as JSON escapes
        assert {r["run_id"] for r in json.loads(out)} == {PARENT, CAND}
    else:
        assert printable(PARENT) in out and printable(CAND) in out


def test_aggregate_prints_names_escaped(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["aggregate", "--store", str(hostile_store), "--metric", "success", "--resamples", "50"]
    code, out, _ = _run(argv, capsys)
    assert code == 0 and printable(CAND) in out


def test_compare_refusal_quotes_the_digests_verbatim_and_escaped(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The digests hold ``{}``, ``{0}``, ``%s``: the gate's message quotes them (they used to
    be read as a polars format string: ShapeError)."""
    argv = ["compare", "--store", str(hostile_store), f"--candidate={CAND}", f"--parent={PARENT}"]
    code, _, err = _run(argv, capsys)
    assert code == 2
    assert "benchmark_digest 'sha256:%(x)s{name}' != parent's 'sha256:{}{0}%s'" in err
    assert printable(CAND) in err


def test_compare_forced_prints_table_and_notes_escaped(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(hostile_store), f"--candidate={CAND}",
            f"--parent={PARENT}", "--force", "--resamples", "50", "--wide"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    note = next(line for line in out.splitlines() if line.startswith(f"* {printable(CAND)}"))
    assert "pair(s) dropped" in note


def test_compare_csv_neutralises_formulas_and_keeps_numbers(
    hostile_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "cmp.csv"
    argv = ["compare", "--store", str(hostile_store), f"--candidate={PARENT}",
            f"--parent={CAND}", "--force", "--resamples", "50", "--format", "csv",
            "-o", str(out_file)]  # fmt: skip
    assert main(argv) == 0
    [row] = [
        r for r in csv.DictReader(io.StringIO(out_file.read_text())) if r["level"] == "overall"
    ]
    assert row["candidate"] == "'" + PARENT  # starts with '-': a formula once opened
    assert "{'benchmark_digest'" not in row["gate_note"]
    assert float(row["mean_diff"]) < 0 and row["mean_diff"].startswith("-")  # a number
    runs_csv = tmp_path / "runs.csv"
    assert main(["runs", "--store", str(hostile_store), "--format", "csv",
                 "-o", str(runs_csv)]) == 0  # fmt: skip
    runs = list(csv.DictReader(io.StringIO(runs_csv.read_text())))
    assert {r["run_id"] for r in runs} == {"'" + PARENT, "'" + CAND}  # verbatim, data kept
    assert all(r["agent_name"].startswith("'=HYPERLINK(") for r in runs)


@pytest.mark.slow
def test_report_of_runs_whose_names_and_digests_are_hostile(
    hostile_store: Path, tmp_path: Path
) -> None:
    from hylo_analytics.report import write_report

    store = ha.open_store(hostile_store)
    page = write_report(
        store.parquet, CAND, PARENT, tmp_path / "r.html", force=True, n_resamples=50
    )
    text = page.read_text()  # drawn: vl-convert used to abort the process on ESC in a label
    assert "sha256:%(x)s{name}" in text and "<svg" in text


def test_compare_flips_prints_names_and_paths_escaped(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["compare", "--store", str(hostile_store), f"--candidate={CAND}",
            f"--parent={PARENT}", "--force", "--flips", "--wide"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    heads = [line for line in out.splitlines() if line.startswith(printable(CAND))]
    assert heads and all(f"vs {printable(PARENT)}, success, task " in h for h in heads)


@pytest.mark.parametrize("show", ["ranks", "matrix", "strengths"])
def test_rank_prints_names_escaped(
    hostile_store: Path, show: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agents' names are spreadsheet formulas holding ESC, BEL and a bidi override; ranked by
    run id they print escaped in every table."""
    argv = ["rank", "--store", str(hostile_store), "--policy", "run_id", "--show", show,
            "--resamples", "50", "--wide"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert printable(CAND) in out and printable(PARENT) in out


@pytest.mark.parametrize("show", ["ranks", "pairs", "cliques"])
def test_critical_difference_prints_names_escaped(
    hostile_store: Path, show: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["critical-difference", "--store", str(hostile_store), "--policy", "run_id",
            "--show", show, "--wide"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert printable(CAND) in out and printable(PARENT) in out


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_summarize_prints_names_escaped(
    hostile_store: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["summarize", "--store", str(hostile_store), "--by", "run_id", "--resamples", "50",
            "--format", fmt, "--wide"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert printable(CAND) in out and printable(PARENT) in out
    if fmt == "csv":  # the agent-name formula never reaches a cell unquoted
        assert all(not cell.startswith("=") for row in csv.reader(io.StringIO(out)) for cell in row)


@pytest.mark.parametrize("fmt", ["table", "csv"])
def test_shrink_prints_names_escaped(
    hostile_store: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(["shrink", "--store", str(hostile_store), "--format", fmt, "--wide"],
                        capsys)  # fmt: skip
    assert code == 0
    assert printable(CAND) in out and printable(PARENT) in out
    if fmt == "csv":
        assert all(not cell.startswith("=") for row in csv.reader(io.StringIO(out)) for cell in row)


def test_a_cut_table_of_hostile_ids_stays_escaped(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """300 rows of hostile ids: the table is cut, says what it hides, and nothing is raw."""
    argv = ["sql", "--store", str(hostile_store), "select run_id, agent_name, i "
            "from runs, range(150) as t(i) order by run_id, i"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert printable(CAND) in out and printable(PARENT) in out
    last = out.splitlines()[-1]
    assert last == (
        "* 100 of 300 rows hidden (the first and last 100 shown): --all prints every row; "
        "-o FILE, --format csv and --format json write them all"
    )


def test_a_selector_names_hostile_runs_inertly(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate selector matching both hostile runs names the one that is not the parent;
    a hostile selector that matches nothing is refused, escaped and never formatted."""
    argv = ["compare", "--store", str(hostile_store), "--candidate=benchmark=held{}out%s",
            f"--parent={PARENT}", "--force", "--resamples", "50", "--format", "json"]  # fmt: skip
    code, out, _ = _run(argv, capsys)
    assert code == 0
    assert {r["candidate"] for r in json.loads(out)} == {CAND}
    argv = ["compare", "--store", str(hostile_store), "--candidate=version=\x1b[2J{0}%s",
            f"--parent={PARENT}"]  # fmt: skip
    code, _, err = _run(argv, capsys)
    assert code == 2
    assert "no run matches 'version=\\x1b[2J{0}%s'" in err  # verbatim, the ESC escaped
    argv = ["compare", "--store", str(hostile_store), f"--candidate=run={PARENT}",
            f"--parent={PARENT}"]  # fmt: skip
    code, _, err = _run(argv, capsys)
    assert code == 2 and "matches only the parent run" in err and printable(PARENT) in err


@pytest.mark.parametrize(("show", "fmt"), [("runs", "table"), ("runs", "csv"),
                                           ("suites", "table"), ("keys", "table")])  # fmt: skip
def test_flip_matrix_prints_names_escaped(
    hostile_store: Path, show: str, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["flip-matrix", "--store", str(hostile_store), "--show", show, "--format", fmt,
            "--wide"]  # fmt: skip
    code, out, err = _run(argv, capsys)  # stderr names the latest run: escaped too
    assert code == 0
    assert printable(CAND) in err  # the latest run (1.1.0 after 1.0.0)
    if show == "runs":
        assert printable(CAND) in out and printable(PARENT) in out
    if fmt == "csv":
        assert all(not cell.startswith("=") for row in csv.reader(io.StringIO(out)) for cell in row)
