"""Store.critical_difference / critical_difference_scores: the block means are the aggregate's,
the ranks follow the metric's direction, blocks a policy lacks are left out visibly, and 2,000
policies over 50 tasks take seconds (both tests)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest
import scikit_posthocs as sp
from scipy import stats

import hylo_analytics as ha
from hylo_analytics import charts
from hylo_analytics.compare import CriticalDifference, critical_difference_scores
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.stats.critical_difference import block_ranks
from hylo_analytics.testing import SynthConfig, write_dataset


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ha.Store:
    """Six agents (two runs each) on ten tasks of five seeds, no errored episode."""
    root = tmp_path_factory.mktemp("cd")
    config = SynthConfig(runs=12, tasks=10, seeds=5, agents=6, traces_per_run=0, error_rate=0)
    write_dataset(root / "logs", config)
    s = ha.open_store(root / "store")
    s.ingest(root / "logs", progress=False)
    return s


def _frame(values: np.ndarray, metric: str = "success") -> pl.DataFrame:
    """A scores frame of one value per (policy, task): ``values`` is tasks x policies."""
    n, k = values.shape
    return pl.DataFrame(
        {
            "agent": np.repeat([f"a{p}" for p in range(k)], n),
            "task_id": np.tile([f"t{t:02d}" for t in range(n)], k),
            "metric": metric,
            "value": values.T.ravel(),
        }
    )


def test_the_block_means_are_the_aggregates(store: ha.Store) -> None:
    cd = store.critical_difference()
    cells = store.aggregate(["agent_name", "benchmark_id", "split", "task_id"],
                            metrics=["success"], statistics=["mean"])  # fmt: skip
    matrix = cells.pivot("agent_name", index="task_id", values="mean").sort("task_id")
    names = sorted(c for c in matrix.columns if c != "task_id")
    x = matrix.select(names).to_numpy()
    avg = dict(zip(names, block_ranks(x).mean(axis=0), strict=True))
    assert cd.ranks["avg_rank"].to_list() == pytest.approx([avg[p] for p in cd.ranks["policy"]])
    assert cd.ranks["mean"].to_list() == pytest.approx(
        [x[:, names.index(p)].mean() for p in cd.ranks["policy"]]
    )
    assert cd.friedman.statistic == pytest.approx(stats.friedmanchisquare(*x.T).statistic)
    nemenyi = sp.posthoc_nemenyi_friedman(x).to_numpy()
    for row in cd.pairs.iter_rows(named=True):
        a, b = names.index(row["policy"]), names.index(row["opponent"])
        assert row["p"] == pytest.approx(nemenyi[a, b], abs=1e-13)
    assert cd.pairs.height == 15 and cd.blocks["used"].all() and cd.notes == ()
    assert (cd.ranks["rank"].to_list(), cd.direction) == (list(range(1, 7)), "maximize")
    assert set(cd.ranks["cliques"].explode().to_list()) == set(cd.cliques["clique"].to_list())


def test_wilcoxon_pairs_are_each_pairs_signed_rank(store: ha.Store) -> None:
    every = [f"agent=policy-{i:04d}" for i in range(6)]  # selectors, each naming two runs
    cd = store.critical_difference(test="wilcoxon", runs=every)
    assert cd.test == "wilcoxon" and cd.ranks.height == 6
    cells = store.aggregate(["agent_name", "task_id"], metrics=["success"], statistics=["mean"])
    x = cells.pivot("agent_name", index="task_id", values="mean").sort("task_id")
    holm = sp.posthoc_wilcoxon(
        [np.round(x[p].to_numpy() * 10) for p in sorted(x.columns[1:])], p_adjust="holm"
    ).to_numpy()  # rates of 10 episodes: their ties are the integer successes'
    names = sorted(x.columns[1:])
    for row in cd.pairs.iter_rows(named=True):
        a, b = names.index(row["policy"]), names.index(row["opponent"])
        assert row["p_holm"] == pytest.approx(holm[a, b], rel=1e-12)
        assert row["significant"] == (row["p_holm"] < 0.05)


def test_lower_is_better_reverses_the_ranks(store: ha.Store) -> None:
    fewer = store.critical_difference(metric="steps")  # the registry: minimize
    more = store.critical_difference(metric="steps", directions={"steps": "maximize"})
    assert (fewer.direction, more.direction) == ("minimize", "maximize")
    low = dict(fewer.ranks.select("policy", "avg_rank").iter_rows())
    high = dict(more.ranks.select("policy", "avg_rank").iter_rows())
    assert {p: 7 - r for p, r in low.items()} == pytest.approx(high)
    assert fewer.ranks["mean"][0] < fewer.ranks["mean"][-1]  # the best takes fewer steps


def test_blocks_a_policy_lacks_are_left_out_and_said() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(12, 4)) + np.arange(4)
    frame = _frame(x).filter(~((pl.col("agent") == "a0") & pl.col("task_id").is_in(["t03", "t07"])))
    cd = critical_difference_scores(frame, policy="agent")
    assert cd.friedman.n_blocks == 10
    lacking = cd.blocks.filter(~pl.col("used"))
    assert lacking["task_id"].to_list() == ["t03", "t07"]
    assert lacking["lacks"].to_list() == [["a0"], ["a0"]]
    assert dict(cd.ranks.select("policy", "n_missing").iter_rows())["a0"] == 2
    assert any("2 of 12 blocks left out" in n and "a0 (no value on 2 of 12)" in n for n in cd.notes)
    kept = np.delete(x, [3, 7], axis=0)
    assert cd.friedman.statistic == pytest.approx(stats.friedmanchisquare(*kept.T).statistic)


def test_too_few_complete_blocks_and_other_refusals() -> None:
    x = np.arange(12.0).reshape(4, 3)
    lonely = _frame(x).filter((pl.col("agent") != "a2") | (pl.col("task_id") == "t00"))
    with pytest.raises(SelectionError, match=r"only 1 of 4 blocks.*a2 \(no value on 3 of 4\)"):
        critical_difference_scores(lonely, policy="agent")
    with pytest.raises(SelectionError, match="at least two policies"):
        critical_difference_scores(_frame(x), policy="agent", policies=["a1"])
    with pytest.raises(SelectionError, match=r"for policies \['zz'\]"):
        critical_difference_scores(_frame(x), policy="agent", policies=["a1", "zz"])
    with pytest.raises(InputError, match="test must be"):
        critical_difference_scores(_frame(x), policy="agent", test="t")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="no column of blocks='suite'"):
        critical_difference_scores(_frame(x), policy="agent", blocks="suite")
    with pytest.raises(SelectionError, match=r"no scores of metric\(s\) \['done'\]"):
        critical_difference_scores(_frame(x), policy="agent", metric="done")


def test_too_few_blocks_for_wilcoxon_holm_is_said() -> None:
    """Five blocks: the smallest signed-rank p is 2/32 > 0.05, so no pair can differ."""
    x = np.arange(20.0).reshape(5, 4)  # every block agrees: the strongest evidence there is
    cd = critical_difference_scores(_frame(x), policy="agent", test="wilcoxon")
    assert not cd.pairs["significant"].any()
    assert any("no pair can be significant" in n for n in cd.notes)
    many = critical_difference_scores(_frame(np.arange(40.0).reshape(10, 4)), policy="agent",
                                      test="wilcoxon")  # fmt: skip
    assert many.pairs["significant"].all() and not any("no pair can" in n for n in many.notes)


def test_unknown_direction_is_ranked_higher_better_and_said() -> None:
    x = np.random.default_rng(2).normal(size=(10, 3))
    cd = critical_difference_scores(_frame(x, "quality"), policy="agent", metric="quality")
    assert cd.direction == "maximize (assumed)"
    assert any("no known direction" in n for n in cd.notes)
    assert cd.ranks["policy"][0] == f"a{int(np.argmax(block_ranks(-x).sum(axis=0)))}"


def test_blocks_by_suite_and_by_columns() -> None:
    rng = np.random.default_rng(3)
    suite = [
        _frame(rng.normal(size=(6, 3))).with_columns(benchmark_id=pl.lit(b), split=pl.lit("s"))
        for b in ("libero", "simpler", "calvin")
    ]
    rows = pl.concat(suite)
    suites = critical_difference_scores(rows, policy="agent", blocks="suite")
    assert suites.block_columns == ("benchmark_id", "split") and suites.friedman.n_blocks == 3
    tasks = critical_difference_scores(rows, policy="agent")  # a task of its suite
    assert tasks.block_columns == ("benchmark_id", "split", "task_id")
    assert tasks.friedman.n_blocks == 18
    by_id = critical_difference_scores(rows, policy="agent", blocks=["task_id"])
    assert by_id.friedman.n_blocks == 6  # the same task id in three suites: one block


def test_errored_cells_say_how_to_keep_their_blocks(tmp_path: Path) -> None:
    write_dataset(tmp_path / "logs", SynthConfig(runs=3, tasks=10, seeds=1, agents=3,
                                                 traces_per_run=0, error_rate=0.1, seed=3))  # fmt: skip
    s = ha.open_store(tmp_path / "store")
    s.ingest(tmp_path / "logs", progress=False)
    cd = s.critical_difference()
    assert 2 <= cd.friedman.n_blocks < 10
    assert any("errors='failure'" in n for n in cd.notes)
    assert s.critical_difference(errors="failure").friedman.n_blocks == 10


def test_html_and_chart(store: ha.Store, tmp_path: Path) -> None:
    cd = store.critical_difference()
    html = cd._repr_html_()
    assert "Critical differences on <code>success</code>" in html and "CD =" in html
    assert "policy-0000" in html and repr(cd).startswith("CriticalDifference(")
    assert set(cd.tests["test"]) == {"friedman chi-square", "iman-davenport F", "nemenyi CD"}
    png = charts.save(cd.chart(), tmp_path / "cd.png")
    assert png.read_bytes()[:4] == b"\x89PNG"
    spec = cd.chart().to_dict()
    assert "6 policies over 10 blocks" in spec["title"]["subtitle"][0]
    wilcoxon = store.critical_difference(test="wilcoxon").chart().to_dict()
    assert "Wilcoxon" in wilcoxon["title"]["subtitle"][1]
    with pytest.raises(InputError, match="top must be >= 2"):
        cd.chart(top=1)


@pytest.fixture(scope="module")
def many() -> pl.DataFrame:
    """2,000 policies on 50 tasks, each cell a success rate of 10 episodes."""
    rng = np.random.default_rng(0)
    k, n = 2000, 50
    skill = rng.normal(size=k)
    x = rng.binomial(10, 1 / (1 + np.exp(-(skill[None, :] + rng.normal(size=(n, 1)))))) / 10
    return _frame(x)


@pytest.mark.parametrize("test", ["nemenyi", "wilcoxon"])
def test_two_thousand_policies_over_fifty_tasks(many: pl.DataFrame, test: str) -> None:
    cd = critical_difference_scores(many, policy="agent", test=test)  # type: ignore[arg-type]
    assert isinstance(cd, CriticalDifference)
    assert cd.ranks.height == 2000 and cd.pairs.height == 1_999_000
    assert cd.friedman.n_blocks == 50 and cd.friedman.p < 1e-100
    with pytest.raises(InputError, match="made without its chart"):
        cd.chart()  # a frame's result: the compare stage imports no chart
    spec = charts.critical_difference_diagram(cd).to_dict()
    assert (
        "the 15 best and 15 worst of 2,000 policies named (1,970 left out)"
        in (spec["title"]["subtitle"][0])
    )
    top = cd.ranks.head(3)["policy"].to_list()
    pairs = cd.pairs.filter(pl.col("policy").cast(pl.String) == top[0])
    assert pairs.height == 1999 and pairs["rank_diff"].min() >= 0  # type: ignore[operator]


def test_two_thousand_runs_of_a_store(many_runs_store: ha.Store) -> None:
    cd = many_runs_store.critical_difference(policy="run_id")
    assert cd.ranks.height == 2000 and cd.block_columns == ("benchmark_id", "split", "task_id")
    assert cd.friedman.n_blocks + cd.blocks.filter(~pl.col("used")).height == 2
