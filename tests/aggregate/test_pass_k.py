"""pass@k and pass^k curves of stored runs: by hand on a literal store (errors policies,
items short of k, keys or tasks as items, groups of runs), a frame equal to its store, and
Inspect's own pass_at_k / pass_k_k reducers on a log ``inspect_ai`` wrote, to 12 digits."""

from __future__ import annotations

from math import comb
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from _inspect_logs import EPOCHS, generate_in_subprocess
from flip_data import commit, episode_rows, run_row
from repeated_data import epochs_store, literal_store

import hylo_analytics as ha
from hylo_analytics.aggregate import pass_k_curves
from hylo_analytics.stats.repeated import pass_curves


def _at(n: int, c: int, k: int) -> float:
    return 1 - comb(n - c, k) / comb(n, k)


def _hat(n: int, c: int, k: int) -> float:
    return comb(c, k) / comb(n, k)


@pytest.fixture(scope="module")
def literal(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    return literal_store(tmp_path_factory.mktemp("pass-k") / "store")


def _curve(frame: pl.DataFrame, **where: str) -> pl.DataFrame:
    for col, value in where.items():
        frame = frame.filter(pl.col(col) == value)
    return frame.sort("k")


def test_by_run_by_hand_with_each_runs_errors_policy(literal: ha.Store) -> None:
    out = literal.pass_at_k()
    assert out.columns[:4] == ["run_id", "metric", "item", "k"]
    # r-a (errors left out): (n, c) = (3, 2), (3, 0), (2, 2), (2, 1)
    a = _curve(out, run_id="r-a")
    items = [(3, 2), (3, 0), (2, 2), (2, 1)]
    assert a["k"].to_list() == [1, 2, 3]
    for row in a.iter_rows(named=True):
        k = row["k"]
        used = [(n, c) for n, c in items if n >= k]
        assert row["pass_at_k"] == pytest.approx(np.mean([_at(n, c, k) for n, c in used]))
        assert row["pass_hat_k"] == pytest.approx(np.mean([_hat(n, c, k) for n, c in used]))
        assert (row["n_items"], row["n_items_short"]) == (len(used), 4 - len(used))
        assert row["n_samples"] == sum(n for n, _ in used)
        assert row["pass_at_k_low"] <= row["pass_at_k"] <= row["pass_at_k_high"]
    assert a["errors"].unique().to_list() == ["exclude"] and a["n_errors"][0] == 1
    assert a["pass_at_k"].to_list() == pytest.approx([(2 / 3 + 1 + 0.5) / 4, 0.75, 0.5])
    # r-b (vla-eval: an errored epoch is a failure): (3, 3), (3, 1), (3, 2), (3, 1)
    b = _curve(out, run_id="r-b")
    assert b["n_items"].to_list() == [4, 4, 4] and b["errors"][0] == "failure"
    assert b["pass_at_k"][0] == pytest.approx(7 / 12)
    assert b["pass_hat_k"][2] == pytest.approx(0.25)  # only t0#0 passes all three
    assert set(out["ci_method"]) == {"wilson, effective n (over items)"}


def test_errors_excluded_shortens_items_visibly(literal: ha.Store) -> None:
    b = _curve(literal.pass_at_k("r-b", errors="exclude"), run_id="r-b")
    # t1#0 keeps two valid epochs of three: short at k = 3, counted
    assert b["n_items_short"].to_list() == [0, 0, 1]
    assert b["pass_hat_k"][2] == pytest.approx(np.mean([1.0, 0.0, 0.0]))
    failed = _curve(literal.pass_at_k("r-a", errors="failure"), run_id="r-a")
    assert failed["n_items"].to_list() == [4, 4, 3]  # (1, E, 0) is three samples now


def test_groups_pool_their_runs_and_tasks_are_items(literal: ha.Store) -> None:
    out = literal.pass_at_k(["r-a", "r-b"], by=["agent_name"], errors="exclude")
    octo = _curve(out, agent_name="octo")
    # a key's samples are its epochs in both runs: t0#0 (6, 5), t0#1 (6, 1), t1#0 (4, 4),
    # t1#1 (5, 2)
    items = [(6, 5), (6, 1), (4, 4), (5, 2)]
    assert octo["k"].to_list() == list(range(1, 7))
    for row in octo.iter_rows(named=True):
        used = [(n, c) for n, c in items if n >= row["k"]]
        assert row["pass_at_k"] == pytest.approx(np.mean([_at(n, c, row["k"]) for n, c in used]))
    tasks = _curve(literal.pass_at_k("r-a", item="task_id"), run_id="r-a")
    # t0: (1,0,1,0,0,0) is (6, 2); t1: (1,1,1,0) is (4, 3)
    assert tasks["item"][0] == "task_id" and tasks["k"].max() == 6
    assert tasks["pass_at_k"][1] == pytest.approx(np.mean([_at(6, 2, 2), _at(4, 3, 2)]))
    assert tasks["n_items_short"].to_list() == [0, 0, 0, 0, 1, 1]


def test_asked_k_and_the_frame_equals_the_store(literal: ha.Store) -> None:
    out = literal.pass_at_k(["r-a"], k=[2, 5], ci="normal")
    assert out["k"].to_list() == [2, 5]
    assert out["n_items"].to_list() == [4, 0] and out["pass_at_k"][1] is None
    frame = literal.sql(
        "select s.*, r.benchmark_id, r.split from int_scores_preferred s "
        "join stg_runs r using (run_id) where s.run_id in ('r-a', 'r-c')"
    )
    from_frame = pass_k_curves(frame, errors="exclude").sort("run_id", "k")
    from_store = literal.pass_at_k(["r-a", "r-c"], errors="exclude").sort("run_id", "k")
    assert from_frame.drop("n_errors").equals(from_store.drop("n_errors"))


def test_values_other_than_0_and_1_are_refused(tmp_path: Path) -> None:
    samples, scores = episode_rows("r", "t#0", (0.5, 1))
    store = commit(tmp_path / "s", [run_row("r", "1.0", "hylo.evallog/v0.1")], samples, scores)
    with pytest.raises(ValueError, match="values other than 0 and 1"):
        store.pass_at_k()
    with pytest.raises(ValueError, match=r"pass_at_k: no scores of metric\(s\) \['nope'\]"):
        store.pass_at_k(metric="nope")


def test_two_suites_keys_are_two_items(tmp_path: Path) -> None:
    runs = [run_row("r1", "1.0", "hylo.evallog/v0.1", benchmark="b1"),
            run_row("r2", "1.0", "hylo.evallog/v0.1", benchmark="b2", at=1)]  # fmt: skip
    samples, scores = [], []
    for run, cell in (("r1", (1, 1)), ("r2", (0, 0))):
        got = episode_rows(run, "t#0", cell)
        samples += got[0]
        scores += got[1]
    store = commit(tmp_path / "s", runs, samples, scores)
    out = store.pass_at_k(by=["agent_name"]).sort("k")
    assert out["n_items"].to_list() == [2, 2] and out["pass_at_k"][0] == pytest.approx(0.5)


# -- Inspect's own reducers on a log inspect_ai wrote -------------------------------------


@pytest.fixture(scope="module")
def inspect_epochs(tmp_path_factory: pytest.TempPathFactory) -> tuple[ha.Store, Path]:
    root = tmp_path_factory.mktemp("inspect-epochs")
    log = generate_in_subprocess(root / "logs", "generate_epochs")["epochs"]
    store = ha.open_store(root / "store")
    report = store.ingest(log, progress=False)
    assert report.quarantined == 0, report
    return store, log


@pytest.mark.slow
def test_equal_to_inspects_pass_at_and_pass_k_reducers(
    inspect_epochs: tuple[ha.Store, Path],
) -> None:
    """``inspect_ai`` reduced each sample's epochs by its ``pass_at_k`` / ``pass_k_k`` and
    averaged them (``accuracy``): the same figures, to 12 digits, for every k."""
    from inspect_ai.log import read_eval_log

    store, path = inspect_epochs
    log = read_eval_log(str(path))
    assert log.results is not None
    theirs = {
        (s.reducer, s.name): s.metrics["accuracy"].value
        for s in log.results.scores
        if s.name == "match"
    }
    ours = store.pass_at_k(metric="match").sort("k")
    assert ours["k"].to_list() == list(range(1, EPOCHS + 1))
    assert ours["n_items"].to_list() == [12] * EPOCHS
    counts = store.sql(
        "select key, count(*) as n, sum(value) as c from stg_scores "
        "where metric = 'match' group by key"
    )
    assert set(counts["n"]) == {EPOCHS} and counts["c"].n_unique() > 3  # flaky: c varies
    for row in ours.iter_rows(named=True):
        k = row["k"]
        assert row["pass_at_k"] == pytest.approx(theirs[(f"pass_at_{k}", "match")], abs=1e-12)
        assert row["pass_hat_k"] == pytest.approx(theirs[(f"pass_k_{k}", "match")], abs=1e-12)
    # per sample too: Inspect's reductions of each sample are the items' estimates
    reduced = {(r.reducer, s.sample_id): s.value for r in log.reductions or []
               if r.scorer == "match" for s in r.samples}  # fmt: skip
    from hylo_analytics.stats.repeated import pass_at

    for key, n, c in counts.iter_rows():
        for k in range(1, EPOCHS + 1):
            want = reduced[(f"pass_at_{k}", key.split("#", 1)[1])]
            assert float(pass_at(n, c, k)) == pytest.approx(want, abs=1e-12)


# -- at scale -------------------------------------------------------------------------------


@pytest.mark.slow
def test_2000_runs_by_run_and_by_policy(tmp_path: Path) -> None:
    """2,000 runs x 50 keys x 4 epochs (400,000 samples) through the store, checked
    against the stats function on the values; the 500-key, 5-epoch case is
    bench_repeated.py's (the reading here, the statistics at full size below)."""
    store, values = epochs_store(tmp_path / "s", 2000, 50, 4)
    out = store.pass_at_k()
    assert out.height == 2000 * 4
    c = values.sum(axis=2).ravel()
    want = pass_curves(np.full(c.size, 4), c, np.repeat(np.arange(2000), 50))
    assert out.sort("run_id", "k")["pass_at_k"].to_numpy() == pytest.approx(want.pass_at_k)
    assert out.sort("run_id", "k")["pass_hat_k_low"].to_numpy() == pytest.approx(
        want.pass_hat_k_low
    )
    policy = store.pass_at_k(by=["agent_name"])  # ten policies, 200 runs each: k to 800
    assert policy["agent_name"].n_unique() == 10 and policy["k"].max() == 800


def test_statistics_of_a_million_items() -> None:
    """The issue's scale: 2,000 runs x 500 keys x 5 epochs, as the stage hands it over."""
    rng = np.random.default_rng(0)
    c = rng.binomial(5, rng.beta(0.5, 0.5, 1_000_000))
    got = pass_curves(np.full(c.size, 5), c, np.repeat(np.arange(2000), 500))
    assert got.k.size == 10_000 and np.all(got.pass_at_k_low <= got.pass_at_k)


def test_the_verbs_defaults_are_the_engines() -> None:
    from hylo_analytics import _stat_verbs
    from hylo_analytics.stats import DEFAULT_LEVEL, DEFAULT_RESAMPLES

    assert _stat_verbs.DEFAULT_LEVEL == DEFAULT_LEVEL
    assert _stat_verbs.DEFAULT_RESAMPLES == DEFAULT_RESAMPLES
