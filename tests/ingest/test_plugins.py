"""Reader plug-ins: a package installs a reader under the ``hylo_analytics.readers`` entry
point group and the ingest finds it.

"Installed" here is what pip leaves on disk, made by hand: a module and its
``<name>-<version>.dist-info`` folder (``METADATA``, ``entry_points.txt``) in a folder put on
``sys.path``. ``importlib.metadata`` discovers it as it discovers any installed distribution
(real entry-point discovery, no mock); a ``pip install`` into a fresh venv would test the same
lookup at the price of a minute per run.
"""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import detect
from hylo_analytics.ingest._registry import ENTRY_POINT_GROUP, READERS, plugin_readers, readers

# a format of its own: ``tally`` text files, one "<task> <seed> <0|1>" per line
PLUGIN = '''
"""tally: a harness's results, one "<task> <seed> <0|1>" line per episode."""

import pyarrow as pa

from hylo_analytics.ingest import Parsed, Problem, Reader

FORMAT = "tally/v1"


def sniff(head, path):
    return head.startswith(b"#tally v1\\n")


def parse(con, files):
    rows, problems = [], []
    for i, f in enumerate(files):
        run_id = f"tally:{f.path.stem}:{f.sha256[:12]}"
        lines = f.data.decode().splitlines()[1:]
        bad = [n for n, line in enumerate(lines, 2) if len(line.split()) != 3]
        if bad:
            problems.append(Problem(str(f.path), bad[0], None, "expected '<task> <seed> <0|1>'"))
            continue
        rows += [(i, run_id, f.path.stem, *line.split()) for line in lines]
    con.register("_t", pa.table(list(zip(*rows)) or [[]] * 6,
                                names=["file_idx", "run_id", "agent", "task", "seed", "ok"]))
    runs = con.sql(f"""SELECT CAST(file_idx AS INT) AS file_idx, run_id,
                       '{FORMAT}' AS source_format, any_value(agent) AS agent_name,
                       'success' AS status, count(*) AS n_samples FROM _t GROUP BY ALL""")
    base = """CAST(file_idx AS INT) AS file_idx, run_id, task || '#' || seed AS key,
              task AS task_id, CAST(seed AS BIGINT) AS seed, 1 AS epoch"""
    samples = con.sql(f"SELECT {base}, CASE ok WHEN '1' THEN 'success' ELSE 'failure' END "
                      "AS status FROM _t")
    scores = con.sql(f"""SELECT {base}, 'success' AS metric, CAST(ok AS DOUBLE) AS value,
                         true AS valid, 'evallog' AS source, 'imported' AS source_kind FROM _t""")
    out = Parsed(runs.to_arrow_table(), samples.to_arrow_table(), scores.to_arrow_table(),
                 problems=problems)
    con.unregister("_t")
    return out


READER = Reader(FORMAT, sniff, parse, suffixes=(".tally",))
'''


def install(site: Path, name: str, module: str, entry_points: str) -> None:
    """A distribution as pip leaves it: the module and its dist-info with entry points."""
    (site / f"{name}.py").write_text(module)
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\n{entry_points}\n")


@pytest.fixture()
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    install(folder, "hylo_tally", PLUGIN, "tally = hylo_tally:READER")
    monkeypatch.syspath_prepend(str(folder))  # and importlib's caches invalidated
    return folder


def _tally(folder: Path, name: str, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.tally"
    path.write_text("#tally v1\n" + "".join(line + "\n" for line in lines))
    return path


def test_no_plugin_installed_means_the_built_in_readers() -> None:
    assert plugin_readers() == ()
    assert readers() == READERS


def test_an_installed_reader_is_found_after_the_built_in_ones(site: Path) -> None:
    found = readers()
    assert found[: len(READERS)] == READERS
    assert [r.format for r in found[len(READERS) :]] == ["tally/v1"]
    assert detect(b"#tally v1\nreach 1 1\n", Path("a.tally"), found).format == "tally/v1"
    assert detect(b"#tally v1\n", Path("a.tally")) is None  # the built-ins alone do not know it


def test_a_plugin_format_goes_through_ingest_aggregate_and_compare(
    site: Path, tmp_path: Path
) -> None:
    data = tmp_path / "results"
    _tally(data, "octo", ["reach 1 1", "reach 2 0", "push 1 1", "push 2 1"])
    _tally(data, "pi0", ["reach 1 0", "reach 2 0", "push 1 1", "push 2 1"])
    _tally(data / "bad", "broken", ["reach 1 1", "reach two"])
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(data, progress=False)  # the walk offers the plug-in's suffix too
    assert dict(report.formats) == {"tally/v1": 3}
    assert report.runs_added == 2 and report.samples_added == 8
    (problem,) = report.problems
    assert problem.path.endswith("broken.tally") and problem.line == 3
    agg = store.aggregate(by=["agent_name"], metrics=["success"]).sort("agent_name")
    assert agg["mean"].to_list() == [0.75, 0.5]
    row = store.compare("agent=octo", "agent=pi0").row(0, named=True)
    assert (row["n_pairs"], row["candidate_wins"], row["parent_wins"]) == (4, 1, 0)
    # unchanged files are not read again
    assert store.ingest(data, progress=False).files_unchanged == 3


def test_a_broken_or_clashing_plugin_is_left_out_with_a_warning(
    site: Path, caplog: pytest.LogCaptureFixture
) -> None:
    install(site, "hylo_broken", "raise RuntimeError('no luck')\n", "broken = hylo_broken:READER")
    clash = textwrap.dedent("""
        from hylo_analytics.ingest._registry import READERS
        from hylo_analytics.ingest import Reader
        READERS_ = [Reader("vla-eval", lambda h, p: True, READERS[0].parse)]
        def readers():
            return READERS_
    """)
    install(site, "hylo_clash", clash, "clash = hylo_clash:readers")
    install(site, "hylo_notone", "READER = 42\n", "notone = hylo_notone:READER")
    with caplog.at_level(logging.WARNING, logger="hylo_analytics.ingest"):
        found = readers()
    assert [r.format for r in found[len(READERS) :]] == ["tally/v1"]
    text = caplog.text
    assert "'broken'" in text and "RuntimeError: no luck" in text
    assert "'clash'" in text and "format 'vla-eval' is already read" in text
    assert "'notone'" in text and "is not a Reader" in text


def test_a_plugin_never_takes_a_built_in_readers_file(site: Path, real_dir: Path) -> None:
    found = readers()
    for path in sorted(real_dir.rglob("*.json"))[:20]:
        head = path.read_bytes()[:4096]
        assert not found[-1].sniff(head, path)
        built_in = detect(head, path)
        assert detect(head, path, found) is built_in


def test_the_ingest_report_lists_plugin_formats(site: Path, tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"hello": 1}')
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(tmp_path / "x.json", progress=False)
    assert "tally/v1" in report.problems[0].error  # "unknown format ... (known formats: ...)"
    assert store.sql("select count(*) from runs").item() == 0
    assert isinstance(report.formats_frame(), pl.DataFrame)
