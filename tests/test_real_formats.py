"""Every verb on every format of issue 44, as a new user would try them: ingest a folder,
then runs, aggregate, compare, rank, summarize, flips, report, serve and export.

The real files are ``../shared/data/real`` (LeRobot, lm-eval, Every Eval Ever), never copied
into the repository; the shapes no public file has are the hand fixtures of the format's own
tests (a second lm-eval model's samples of the same task, vla-eval's current export), each
said so there. Where a format has keys the comparison is paired; where it only has
published figures (an Every Eval Ever leaderboard file) pairing is refused with the reason
and the verbs that need no pairing still answer.
"""

from __future__ import annotations

import html
import json
import shutil
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics.errors import InputError

pytestmark = pytest.mark.slow  # a store per format, a report each

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "ingest"))
import test_ingest_every_eval_ever as eee  # noqa: E402
import test_ingest_lm_eval as lm  # noqa: E402
import test_ingest_vla_eval_aggregate as vag  # noqa: E402


@dataclass(frozen=True)
class Format:
    name: str
    build: Callable[[Path, Path], Path]  # (real_dir, tmp) -> the folder a user ingests
    candidate: str
    parent: str
    metric: str
    pairs: int  # the pairs compare finds (0: refused, the figures have no keys)


def _lerobot(real: Path, tmp: Path) -> Path:
    return real / "lerobot"


def _lm_eval(real: Path, tmp: Path) -> Path:
    root = tmp / "lm-eval-out"
    (root / "Qwen__Qwen3-8B").mkdir(parents=True)
    for name in (lm.RESULTS, lm.SAMPLES):
        shutil.copy(real / "lm-eval" / name, root / "Qwen__Qwen3-8B" / name.removeprefix(lm.PREFIX))
    lm._second_model(real, root / "acme__other-8b", {0, 1, 2})
    return root


def _vla(real: Path, tmp: Path) -> Path:
    for name, server, outcomes in (
        ("pi0", "Pi0ModelServer", vag.PI0),
        ("xvla", "XVLAModelServer", vag.XVLA),
    ):
        (tmp / "vla" / name).mkdir(parents=True)
        doc = vag.export(server, outcomes)
        (tmp / "vla" / name / "libero_spatial_aggregate.json").write_text(json.dumps(doc))
    return tmp / "vla"


def _eee(real: Path, tmp: Path) -> Path:
    return real / "every_eval_ever"


def _eee_counted(real: Path, tmp: Path) -> Path:
    """Two aggregates without instances that give their counts (the hand fixture)."""
    (tmp / "eee").mkdir()
    (tmp / "eee" / "a.json").write_text(json.dumps(eee._aggregate({})))
    (tmp / "eee" / "b.json").write_text(json.dumps(eee._aggregate({}, score=0.7)))
    return tmp / "eee"


FORMATS = (
    Format("lerobot", _lerobot, "agent~teacher31d", "agent~parent_spatial", "success", 100),
    Format("lm-eval", _lm_eval, "agent=acme/other-8b", "agent=Qwen/Qwen3-8B", "exact_match,none", 20),
    Format("vla-eval export", _vla, "agent=XVLAModelServer", "agent=Pi0ModelServer", "success", 12),
    Format("every eval ever", _eee, "agent=ollama/qwen2.5-0.5b", "agent=anthropic/claude-sonnet-4-0", "score", 3),
    Format("eee leaderboard", _eee, "agent=google/gemma-3-4b-it", "agent=openai/gpt-5-2025-08-07", "score", 0),
    Format("eee counted", _eee_counted, "agent=acme/m-0.7", "agent=acme/m-0.62", "score", 0),
)  # fmt: skip


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> dict[str, ha.Store]:
    out: dict[str, ha.Store] = {}
    for f in FORMATS:
        tmp = tmp_path_factory.mktemp(f.name.replace(" ", "-"))
        store = ha.open_store(tmp / "store")
        report = store.ingest(f.build(real_dir, tmp), progress=False)
        assert report.runs_added >= 2, f.name
        out[f.name] = store
    return out


def _id(store: ha.Store, selector: str) -> str:
    """A selector's one run; ``agent~text``: the run whose agent contains ``text``."""
    if "~" in selector:
        text = selector.split("~", 1)[1]
        return str(
            store.sql("select run_id from runs where contains(agent_name, ?)", [text]).item()
        )
    return store.resolve_run(selector)


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_every_verb(fmt: Format, stores: dict[str, ha.Store], tmp_path: Path) -> None:
    store = stores[fmt.name]
    cand, parent = _id(store, fmt.candidate), _id(store, fmt.parent)
    runs = store.runs()
    assert {cand, parent} <= set(runs["run_id"])
    agg = store.aggregate(by=["run_id"], metrics=[fmt.metric])
    assert agg.filter(pl.col("run_id").is_in([cand, parent]))["mean"].null_count() == 0
    if fmt.pairs:
        row = store.compare(cand, parent, metrics=[fmt.metric]).row(0, named=True)
        assert row["n_pairs"] == fmt.pairs
        flips = store.flips(cand, parent, metrics=[fmt.metric])
        assert flips.height == row["candidate_wins"] + row["parent_wins"]
        page = ha.build_report(store, cand, parent, metric=fmt.metric, n_resamples=200)
        text = page.save(tmp_path / "report.html").read_text()
        names = store.sql("select agent_name from runs where run_id in (?, ?)", [cand, parent])
        assert all(html.escape(n) in text for n in names["agent_name"])
    else:
        for call in (
            lambda: store.compare(cand, parent, metrics=[fmt.metric]),
            lambda: store.flips(cand, parent, metrics=[fmt.metric]),
        ):
            with pytest.raises(ha.ComparabilityError, match="without per-sample keys"):
                call()
    ranking = store.rank([cand, parent], metric=fmt.metric, n_resamples=100)
    assert ranking.ranks.height == 2
    by_agent = store.aggregate(by=["agent_name"], metrics=[fmt.metric], runs=[cand, parent])
    means = dict(by_agent.select("agent_name", "mean").iter_rows())
    for r in ranking.ranks.iter_rows(named=True):
        assert r["mean"] == pytest.approx(means[r["policy"]])
    if fmt.name == "eee leaderboard":  # scores, not rates: no across-task rate summary
        with pytest.raises(InputError, match="not 0/1"):
            store.summarize([cand, parent], metric=fmt.metric, n_resamples=100)
    else:
        summary = store.summarize([cand, parent], metric=fmt.metric, n_resamples=100).summary
        assert set(summary["statistic"]) >= {"iqm", "mean"}
    _serve(store, cand, parent, fmt)
    for run in (cand, parent):
        _round_trip(store, run, fmt.metric, tmp_path)


def _serve(store: ha.Store, cand: str, parent: str, fmt: Format) -> None:
    pytest.importorskip("starlette")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx`")
        from starlette.testclient import TestClient
    from hylo_analytics.serve import create_app

    with TestClient(create_app(store.root), base_url="http://localhost") as client:
        page = client.get("/")
        assert page.status_code == 200
        assert html.escape(cand) in page.text and html.escape(parent) in page.text
        params = {"candidate": cand, "parent": parent, "metric": fmt.metric}
        compared = client.get("/compare", params=params)
        assert compared.status_code == (200 if fmt.pairs else 409)
        if not fmt.pairs:
            assert "without per-sample keys" in html.unescape(compared.text)


def _round_trip(store: ha.Store, run: str, metric: str, tmp_path: Path) -> None:
    """Export as a hylo EvalLog (v0.2 holds any key) and read back: the same figure."""
    out = ha.export_evallog(store, run, tmp_path / "out" / f"{abs(hash(run))}.json", version="v0.2")
    again = ha.open_store(tmp_path / f"again-{abs(hash(run))}")
    again.ingest(out, progress=False)
    a = store.aggregate(metrics=[metric], runs=[run]).row(0, named=True)
    b = again.aggregate(metrics=[metric]).row(0, named=True)
    # (a v0.2 sample holds every metric of its run: one another metric scores is an abstention)
    assert (b["n_valid"], b["mean"]) == (a["n_valid"], pytest.approx(a["mean"]))


@pytest.mark.parametrize(
    ("folder", "metric", "published"),
    [
        # overall.pc_success of parent / teacher31d / KYH-99 task00, as a rate
        ("lerobot", "success", {0.87, 0.78, 0.8}),
        # acc,none of belief (9/20) and desire (12/20) pooled: the group's 0.525
        ("lm-eval", "acc,none", {0.525}),
        # score_details.score of the two ai2_arc aggregates, from their instances
        ("every_eval_ever", "score", {1 / 3, 1.0}),
    ],
)
def test_the_cli_as_a_new_user(
    folder: str,
    metric: str,
    published: set[float],
    real_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``hylo-analytics ingest <their folder>``, then ``aggregate``: the harness's numbers."""
    from hylo_analytics.cli import main

    store = str(tmp_path / "store")
    code = main(["ingest", "--store", store, str(real_dir / folder)])
    # the folders hold files no reader claims (a PPO summary, a JSON schema): quarantined,
    # and the exit status says so (3)
    held = ha.open_store(store, create=False).sql("select count(*) as n from quarantine")
    assert code == (3 if held["n"].item() else 0)
    capsys.readouterr()
    argv = ["aggregate", "--store", store, "--metric", metric, "--format", "json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {round(r["mean"], 12) for r in rows if r["mean"] is not None}
    assert {round(v, 12) for v in published} <= got
