"""Every Eval Ever: the real files of ``../shared/data/real/every_eval_ever`` (schema 0.2.0
aggregates with and without instances, instance JSONL), and hand fixtures of what no stored
file has: an aggregate without instances that gives its count (written from the schema,
``every_eval_ever/schemas/eval.schema.json``: ``score_details.uncertainty.num_samples``, "Number
of samples used to compute the uncertainty estimates", as the Inspect converter fills it)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.ingest import detect
from hylo_analytics.stats import wilson

QWEN = "data__ai2_arc__ollama__qwen2.5-0.5b__75e7b3c4-5d2f-4526-aef0-9ccd88690f5a.json"
CLAUDE = "data__ai2_arc__anthropic__claude-sonnet-4-0__0479dd23-e008-47f5-a790-15e7cbb08fc7.json"
SCHEMA = "every_eval_ever__schemas__instance_level_eval.schema.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> ha.Store:
    s = ha.open_store(tmp_path_factory.mktemp("eee") / "store")
    report = s.ingest(real_dir / "every_eval_ever", progress=False)
    assert dict(report.formats) == {"every_eval_ever/aggregate": 8, "every_eval_ever/instances": 2}
    (problem,) = report.problems  # the JSON schema is no result file
    assert problem.path.endswith(SCHEMA) and "unknown format" in problem.error
    return s


def test_each_real_file_is_read_by_its_reader(real_dir: Path) -> None:
    for path in sorted((real_dir / "every_eval_ever").iterdir()):
        reader = detect(path.read_bytes()[:4096], path)
        want = (
            None if path.name == SCHEMA
            else "every_eval_ever/instances" if path.suffix == ".jsonl"
            else "every_eval_ever/aggregate"
        )  # fmt: skip
        assert (reader.format if reader else None) == want, path.name


def test_an_aggregate_beside_its_instances_is_their_companion(
    store: ha.Store, real_dir: Path
) -> None:
    files = store.sql("select path, outcome, run_id from ingested_files order by path")
    companions = files.filter(pl.col("outcome") == "companion")
    assert sorted(Path(p).name for p in companions["path"]) == sorted([CLAUDE, QWEN])
    # the checksum the aggregate names is its instance file's sha256
    for name in (QWEN, CLAUDE):
        doc = json.loads((real_dir / "every_eval_ever" / name).read_text())
        run = companions.filter(pl.col("path").str.ends_with(name))["run_id"].item()
        source = store.sql("select source_path from runs where run_id = ?", [run]).item()
        digest = hashlib.sha256(Path(source).read_bytes()).hexdigest()
        assert digest == doc["detailed_evaluation_results"]["checksum"]
    assert store.sql("select count(*) from runs").item() == 8  # 2 instance runs + 6 aggregates


def test_the_instances_give_the_aggregates_own_score(store: ha.Store, real_dir: Path) -> None:
    """qwen2.5-0.5b 0.333 (1 of 3), claude-sonnet-4-0 1.0 (5 of 5): the aggregate file's
    score_details.score is aggregate's mean over its instances."""
    agg = store.aggregate(by=["agent_name"], metrics=["score"])
    for name in (QWEN, CLAUDE):
        doc = json.loads((real_dir / "every_eval_ever" / name).read_text())
        (result,) = doc["evaluation_results"]
        row = agg.filter(pl.col("agent_name") == doc["model_info"]["id"]).row(0, named=True)
        assert row["mean"] == pytest.approx(result["score_details"]["score"], abs=1e-12)
        assert row["n_total"] == len(result["source_data"]["sample_ids"])
        assert row["n_total"] != result["source_data"]["samples_number"]  # 2376: the dataset


def test_two_models_pair_on_the_sample(store: ha.Store) -> None:
    row = store.compare(
        "agent=ollama/qwen2.5-0.5b", "agent=anthropic/claude-sonnet-4-0", metrics=["score"]
    ).row(0, named=True)
    assert (row["n_pairs"], row["candidate_wins"], row["parent_wins"]) == (3, 0, 2)
    assert row["n_unmatched"] == 2  # claude's samples 4 and 5: qwen ran 3
    hashes = store.sql(
        "select key, list(distinct extra->>'$.sample_hash') as h from samples "
        "where key like 'allenai/ai2_arc#%' group by key order by key"
    )
    assert [len(h) for h in hashes["h"]] == [1] * 5  # one hash per sample across the models


def test_a_leaderboard_aggregate_is_its_published_figures(store: ha.Store, real_dir: Path) -> None:
    """Global MMLU Lite publishes a score per evaluation and no count: each is its figure
    (gemma-3-4b-it 0.6511 ... gemini-2.5-pro 0.9323 overall), without an interval."""
    cells = store.aggregate(by=["agent_name", "task_id"], metrics=["score"])
    seen = 0
    for path in sorted((real_dir / "every_eval_ever").glob("data__global-mmlu-lite__*.json")):
        doc = json.loads(path.read_text())
        mine = cells.filter(pl.col("agent_name") == doc["model_info"]["id"])
        for result in doc["evaluation_results"]:
            row = mine.filter(pl.col("task_id") == result["evaluation_name"]).row(0, named=True)
            assert row["mean"] == result["score_details"]["score"]
            assert row["n_total"] == 1 and row["ci_low"] is None
            seen += 1
    assert seen == 6 * 19
    overall = cells.filter(pl.col("task_id") == "Global MMLU Lite")
    assert dict(overall.select("agent_name", "mean").iter_rows())["google/gemma-3-4b-it"] == 0.6511
    statuses = store.sql("select distinct status from samples where key like '%#summary@%'")
    assert statuses["status"].to_list() == ["summary"]


def test_pairing_figures_is_refused_with_the_reason(store: ha.Store) -> None:
    a, b = "agent=google/gemma-3-4b-it", "agent=openai/gpt-5-2025-08-07"
    for call in (
        lambda: store.compare(a, b, metrics=["score"]),
        lambda: store.compare(a, b, metrics=["score"], force=True),  # nothing to force
        lambda: store.flips(a, b, metrics=["score"]),
    ):
        with pytest.raises(ha.ComparabilityError, match=r"only as a published figure.*per-sample"):
            call()


def _aggregate(count: dict[str, object], score: float = 0.62) -> dict[str, object]:
    """An aggregate as the Inspect converter writes it, without its instances."""
    return {
        "schema_version": "0.3.0",
        "evaluation_id": f"gsm8k/acme_m-{score}/1770000000.0",
        "retrieved_timestamp": "1770000000.0",
        "source_metadata": {"source_name": "inspect_ai", "source_type": "evaluation_run",
                            "source_organization_name": "acme", "evaluator_relationship": "first_party"},
        "eval_library": {"name": "inspect_ai", "version": "0.3.150"},
        "model_info": {"name": "acme/m", "id": f"acme/m-{score}", "developer": "acme"},
        "evaluation_results": [{
            "evaluation_name": "accuracy on gsm8k for scorer match",
            "source_data": {"dataset_name": "gsm8k", "source_type": "hf_dataset",
                            "hf_repo": "openai/gsm8k", "samples_number": 1319, **count},
            "metric_config": {"evaluation_description": "accuracy", "lower_is_better": False,
                              "score_type": "continuous", "min_score": 0, "max_score": 1},
            "score_details": {"score": score, "uncertainty": {"standard_error": {"value": 0.069},
                              **({"num_samples": 50} if not count else {})}},
        }],
    }  # fmt: skip


def test_an_aggregate_with_its_count_aggregates_from_it(tmp_path: Path) -> None:
    """0.62 of num_samples 50 is 31 of 50: the mean and Wilson interval of that count (not of
    samples_number, the dataset's 1,319); with only sample_ids, their number is the count."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text(json.dumps(_aggregate({})))
    ids = {"sample_ids": [str(i) for i in range(8)]}
    (tmp_path / "in" / "b.json").write_text(json.dumps(_aggregate(ids, score=0.625)))
    store = ha.open_store(tmp_path / "store")
    assert store.ingest(tmp_path / "in", progress=False).runs_added == 2
    agg = store.aggregate(by=["agent_name"], metrics=["score"]).sort("agent_name")
    for row, (k, n) in zip(agg.iter_rows(named=True), [(31, 50), (5, 8)], strict=True):
        assert (row["n_total"], row["n_valid"]) == (n, n)
        assert row["mean"] == pytest.approx(k / n)
        lo, hi = wilson([k], [n])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((lo[0], hi[0]))
    assert set(store.sql("select status from samples")["status"]) == {"counted"}
    with pytest.raises(ha.ComparabilityError, match=r"a rate of 50 samples"):
        store.compare("agent=acme/m-0.625", "agent=acme/m-0.62", metrics=["score"])


def _instances(folder: Path, name: str, model: str, scores: list[float]) -> Path:
    lines = [
        {"schema_version": "0.2.2", "evaluation_id": f"ev-{model}", "model_id": model,
         "evaluation_name": "gsm8k", "sample_id": str(i), "sample_hash": f"h{i}",
         "interaction_type": "single_turn", "input": {"raw": "q", "reference": ["4"]},
         "output": {"raw": ["4"]}, "evaluation": {"score": s, "is_correct": s == 1.0},
         "error": None}
        for i, s in enumerate(scores)
    ]  # fmt: skip
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def test_instances_named_by_path_make_the_aggregate_a_companion(tmp_path: Path) -> None:
    """The aggregate alone is ingested; the instances its file_path names (relative to the
    repository, here two folders up) are on disk with its checksum: no second run."""
    root = tmp_path / "repo"
    inst = _instances(root / "data" / "gsm8k" / "acme", "m_samples.jsonl", "acme/m", [1.0, 0.0])
    doc = _aggregate({})
    doc["detailed_evaluation_results"] = {
        "format": "jsonl", "file_path": "data/gsm8k/acme/m_samples.jsonl",
        "hash_algorithm": "sha256", "checksum": hashlib.sha256(inst.read_bytes()).hexdigest(),
        "total_rows": 2,
    }  # fmt: skip
    agg = root / "data" / "gsm8k" / "acme" / "m" / "uuid.json"
    agg.parent.mkdir(parents=True)
    agg.write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "store")
    report = store.ingest(agg, progress=False)
    assert report.runs_added == 0 and report.quarantined == 0
    assert store.sql("select outcome from ingested_files").item() == "companion"
    # the instances changed: the aggregate no longer has them, and is a run of its count
    inst.write_text(inst.read_text().replace('"score": 0.0', '"score": 1.0'))
    other = ha.open_store(tmp_path / "store2")
    assert other.ingest(agg, progress=False).runs_added == 1
    assert other.sql("select count(*) from samples").item() == 50


@pytest.mark.parametrize(
    ("edit", "line", "field", "message"),
    [
        (lambda t: t.replace('"score": 0.0', '"score": "zero"'), 2, "evaluation.score",
         "expected number"),
        (lambda t: t.replace('"sample_id": "1"', '"sample_id": "0"'), 2, "sample_id",
         "duplicate sample 0"),
        (lambda t: t.replace('"model_id": "acme/m", "evaluation_name": "gsm8k", "sample_id": "1"',
                             '"model_id": "acme/n", "evaluation_name": "gsm8k", "sample_id": "1"'),
         2, "model_id", "a second model"),
        (lambda t: t.replace('"score": 0.0', '"score": NaN'), 2, "evaluation.score", "non-finite"),
        (lambda t: t + "{not json\n", 3, None, "malformed JSON line"),
    ],
)  # fmt: skip
def test_a_bad_instance_line_is_quarantined_with_its_line(
    tmp_path: Path, edit: object, line: int, field: str | None, message: str
) -> None:
    path = _instances(tmp_path, "m.jsonl", "acme/m", [1.0, 0.0])
    path.write_text(edit(path.read_text()))  # type: ignore[operator]
    report = ha.open_store(tmp_path / "store").ingest(path, progress=False)
    assert report.runs_added == 0
    assert any(
        (p.line, p.field) == (line, field) and message in p.error for p in report.problems
    ), report.problems
