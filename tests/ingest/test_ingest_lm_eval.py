"""lm-evaluation-harness: the real files of ``../shared/data/real/lm-eval`` (a current results
file with the samples of one of its tasks, a 2022 results file), and what no stored file has:
a second model's samples of the same task, made by hand from the real file (its doc_ids,
hashes and layout kept, the model and some outcomes changed), as lm-eval's
``EvaluationTracker.save_results_samples`` writes them beside ``results_<date>.json``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import detect
from hylo_analytics.stats import wilson

PREFIX = "EleutherAI__lm-evaluation-harness__outputs__qwen3-8b__negotiationtom__Qwen__Qwen3-8B__"
DATE = "2026-07-08T16-04-34.219874"
RESULTS = f"{PREFIX}results_{DATE}.json"
SAMPLES = f"{PREFIX}samples_negotiationtom_intention_{DATE}.jsonl"
OLD = "EleutherAI__lm-evaluation-harness__outputs__slim-limited_5_gpt2_xquad.en_0_1234_2022-05-18T16-28-16.621186.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    s = ha.open_store(tmp_path_factory.mktemp("lm") / "store")
    report = s.ingest(real_dir / "lm-eval", progress=False)
    assert dict(report.formats) == {"lm-eval/results": 2, "lm-eval/samples": 1}
    assert report.quarantined == 0 and report.runs_added == 2
    return s


def _qwen(store: ha.Store) -> str:
    return str(store.sql("select run_id from runs where agent_name = 'Qwen/Qwen3-8B'").item())


def test_sniffing(real_dir: Path) -> None:
    for name, want in ((RESULTS, "lm-eval/results"), (SAMPLES, "lm-eval/samples"),
                       (OLD, "lm-eval/results")):  # fmt: skip
        path = real_dir / "lm-eval" / name
        reader = detect(path.read_bytes()[:4096], path)
        assert reader is not None and reader.format == want


def test_aggregate_is_the_results_files_own_figure(store: ha.Store, real_dir: Path) -> None:
    """acc,none 0.45 (belief) and 0.6 (desire) of their 20 documents; the intention task's
    exact_match,none 0.2 from its 20 samples; micro_f1 0.3019 and macro_f1 0.2524, corpus
    metrics, as the file's figures."""
    doc = json.loads((real_dir / "lm-eval" / RESULTS).read_text())
    cells = store.aggregate(by=["task_id"], metrics=None, runs=[_qwen(store)])
    seen = 0
    for task, figures in doc["results"].items():
        if task in doc["groups"]:
            continue  # a group's figures are its subtasks'
        for key, value in figures.items():
            if "," not in key or "_stderr," in key:
                continue
            row = cells.filter((pl.col("task_id") == task) & (pl.col("metric") == key))
            assert row["mean"].item() == pytest.approx(value, abs=1e-12), (task, key)
            seen += 1
    assert seen == 5
    belief = cells.filter(pl.col("task_id") == "negotiationtom_belief").row(0, named=True)
    assert belief["n_total"] == doc["n-samples"]["negotiationtom_belief"]["effective"] == 20
    lo, hi = wilson([9], [20])
    assert (belief["ci_low"], belief["ci_high"]) == pytest.approx((lo[0], hi[0]))
    # the group's acc,none 0.525 is the subtasks' pooled rate: 21 of 40
    pooled = store.aggregate(metrics=["acc,none"], runs=[_qwen(store)]).row(0, named=True)
    assert pooled["mean"] == doc["groups"]["negotiationtom"]["acc,none"] == 0.525
    samples = store.sql(
        "select status, count(*) as n from samples where run_id = ? group by 1 order by 1",
        [_qwen(store)],
    )
    assert dict(samples.rows()) == {"counted": 40, "scored": 20, "summary": 1}


def test_the_2022_layout_is_its_figures(store: ha.Store, real_dir: Path) -> None:
    doc = json.loads((real_dir / "lm-eval" / OLD).read_text())
    gpt2 = store.sql("select run_id from runs where agent_name = 'gpt2'").item()
    cells = store.aggregate(by=["task_id"], metrics=None, runs=[gpt2])
    assert cells.height == len(doc["results"]) == 56
    for rec in doc["results"]:
        (metric,) = set(rec) - {
            "task_name",
            "prompt_name",
            "dataset_path",
            "dataset_name",
            "subset",
        }
        task = f"{rec['task_name']}/{rec['prompt_name']}"
        row = cells.filter((pl.col("task_id") == task) & (pl.col("metric") == metric))
        assert row["mean"].item() == pytest.approx(rec[metric])
    run = store.runs().filter(pl.col("agent_name") == "gpt2").row(0, named=True)
    assert run["benchmark_id"] == "xquad.en"


def _second_model(real_dir: Path, folder: Path, flips: set[int]) -> Path:
    """The real run under another model: its results file with the model renamed and
    exact_match recomputed, its samples with the outcome of the docs in ``flips`` flipped."""
    folder.mkdir(parents=True)
    lines = (real_dir / "lm-eval" / SAMPLES).read_text().splitlines()
    out = []
    for line in lines:
        row = json.loads(line)
        if row["doc_id"] in flips:
            row["exact_match"] = 1.0 - row["exact_match"]
        out.append(json.dumps(row, ensure_ascii=False))
    (folder / f"samples_negotiationtom_intention_{DATE}.jsonl").write_text("\n".join(out) + "\n")
    doc = json.loads((real_dir / "lm-eval" / RESULTS).read_text())
    doc["model_name"] = "acme/other-8b"
    rate = sum(json.loads(x)["exact_match"] for x in out) / len(out)
    doc["results"]["negotiationtom_intention"]["exact_match,none"] = rate
    (folder / f"results_{DATE}.json").write_text(json.dumps(doc))
    return folder


def test_two_models_pair_on_doc_id(tmp_path: Path, real_dir: Path) -> None:
    root = tmp_path / "out"
    for name in (RESULTS, SAMPLES):  # lm-eval's own layout: <model>/results_ + samples_
        (root / "Qwen__Qwen3-8B").mkdir(parents=True, exist_ok=True)
        shutil.copy(
            real_dir / "lm-eval" / name, root / "Qwen__Qwen3-8B" / name.removeprefix(PREFIX)
        )
    qwen = [json.loads(x) for x in (real_dir / "lm-eval" / SAMPLES).read_text().splitlines()]
    right = {r["doc_id"] for r in qwen if r["exact_match"] == 1.0}
    wrong = sorted({r["doc_id"] for r in qwen} - right)
    _second_model(real_dir, root / "acme__other-8b", {*sorted(right)[:2], *wrong[:5]})
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(root, progress=False)
    assert report.runs_added == 2 and report.quarantined == 0
    row = store.compare("agent=acme/other-8b", "agent=Qwen/Qwen3-8B",
                        metrics=["exact_match,none"]).row(0, named=True)  # fmt: skip
    assert (row["n_pairs"], row["candidate_wins"], row["parent_wins"]) == (20, 5, 2)
    assert row["mean_diff"] == pytest.approx(3 / 20)
    flips = store.flips("agent=acme/other-8b", "agent=Qwen/Qwen3-8B", metrics=["exact_match,none"])
    assert sorted(flips["key"]) == sorted(
        f"negotiationtom_intention#{d}" for d in [*sorted(right)[:2], *wrong[:5]]
    )
    # the belief task has no samples: its counts do not pair, and compare says so
    with pytest.raises(ha.ComparabilityError, match=r"only as a rate of 20 samples"):
        store.compare("agent=acme/other-8b", "agent=Qwen/Qwen3-8B", metrics=["acc,none"])


def test_a_samples_file_alone_is_a_run_of_its_own(tmp_path: Path, real_dir: Path) -> None:
    folder = tmp_path / "Qwen__Qwen3-8B"
    folder.mkdir()
    shutil.copy(real_dir / "lm-eval" / SAMPLES, folder / SAMPLES.removeprefix(PREFIX))
    store = ha.open_store(tmp_path / "store")
    assert dict(store.ingest(folder, progress=False).formats) == {"lm-eval/samples": 1}
    run = store.runs().row(0, named=True)
    assert (run["agent_name"], run["benchmark_id"]) == ("Qwen/Qwen3-8B", "negotiationtom_intention")
    assert store.aggregate(metrics=["exact_match,none"])["mean"].item() == 0.2


def test_a_bad_samples_file_costs_its_samples_only(tmp_path: Path, real_dir: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(real_dir / "lm-eval" / RESULTS, folder / RESULTS)
    lines = (real_dir / "lm-eval" / SAMPLES).read_text().splitlines()
    lines[6] = lines[6].replace('"doc_id": 6', '"doc_id": "six"', 1)
    (folder / SAMPLES).write_text("\n".join(lines) + "\n")
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(folder, progress=False)
    (problem,) = report.problems
    assert (problem.line, problem.field) == (7, "doc_id") and problem.path.endswith(SAMPLES)
    # the run is stored from its figures (exact_match 0.2 of 20, counted), and read again
    assert store.aggregate(metrics=["exact_match,none"])["mean"].item() == 0.2
    outcomes = dict(
        store.sql("select regexp_replace(path, '.*/', ''), outcome from ingested_files").rows()
    )
    assert outcomes == {RESULTS: "partial", SAMPLES: "quarantined"}
    # fixed: the next ingest reads both again and the samples are the run's
    (folder / SAMPLES).write_text((real_dir / "lm-eval" / SAMPLES).read_text())
    again = store.ingest(folder, progress=False)
    assert again.runs_added == 1 and again.quarantined == 0
    statuses = set(
        store.sql("select status from samples where task_id like '%intention'")["status"]
    )
    assert statuses == {"scored", "summary"}
    # and a changed samples file alone makes its results file be read again
    text = (folder / SAMPLES).read_text().replace('"exact_match": 0.0', '"exact_match": 1.0', 1)
    (folder / SAMPLES).write_text(text)
    assert store.ingest(folder, progress=False).runs_added == 1
    assert store.aggregate(metrics=["exact_match,none"])["mean"].item() == pytest.approx(0.25)
