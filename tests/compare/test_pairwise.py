"""Every pair at once (compare/pairwise.py) equals the compare engine pair by pair: on 50
policies of 0/1 values with abstentions and two suites (every column the verdict reads, the
rank sets, tie groups and strengths), on numeric values (the bootstrap, bit for bit), and the
store's one-query reader equals the frame path (errors policies, epochs, a policy's runs)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal as assert_equal

import hylo_analytics as ha
from hylo_analytics.compare import compare_scores
from hylo_analytics.compare.pairwise import PolicyValues, pair_counts
from hylo_analytics.compare.ranking import Ranking, _tie_groups, rank_policies
from hylo_analytics.stats.bradley_terry import bradley_terry

N_POLICIES = 50
SUITES = ("s1", "s2")
KEYS = 60
_SEP = "\x1f"
# the columns a verdict reads, and the counts beside it
COMPARED = ("n_pairs", "wins", "losses", "ties", "n_dropped", "n_dropped_candidate",
            "n_dropped_parent", "n_dropped_both", "mean_diff", "ci_low", "ci_high",
            "ci_adj_low", "ci_adj_high", "eq_low", "eq_high", "p_value", "p_worse", "p_holm",
            "p_worse_holm", "p_bh", "p_worse_bh", "p_tost", "p_verdict", "verdict",
            "verdict_note", "test", "ci_method", "family_size")  # fmt: skip


def _binary_scores(n: int = N_POLICIES, seed: int = 0) -> pl.DataFrame:
    """``n`` policies of graded skill on two suites of 60 keys, 0/1 values, 5 % abstentions
    (some of them errored) and a few keys a policy never ran."""
    rng = np.random.default_rng(seed)
    skill = np.linspace(0.2, 0.9, n)
    ease = rng.uniform(-0.3, 0.3, (len(SUITES), KEYS))
    rows = []
    for s, suite in enumerate(SUITES):
        for p in range(n):
            u = rng.uniform(size=KEYS)
            value = (u < np.clip(skill[p] + ease[s], 0.02, 0.98)).astype(float)
            gone = rng.uniform(size=KEYS) < 0.05
            ran = rng.uniform(size=KEYS) > 0.02
            rows.append(
                pl.DataFrame(
                    {
                        "agent": f"p{p:02d}",
                        "suite": suite,
                        "key": [f"k{k}" for k in range(KEYS)],
                        "metric": "success",
                        "value": np.where(gone, np.nan, value),
                        "errored": gone & (rng.uniform(size=KEYS) < 0.5),
                        "skip_reason": pl.Series(np.where(gone, "abstained", "")).replace("", None),
                    }
                ).filter(pl.Series(ran))
            )
    out = pl.concat(rows).with_columns(
        pl.col("value").fill_nan(None), run_id=pl.format("{}-{}", "agent", "suite")
    )
    return out


def _engine_matrix(scores: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Every pair through compare_scores in one call, one family (the old implementation):
    pair i < j is a candidate run holding i's rows, one reference run holds every j."""
    base = scores.with_columns(_key=pl.concat_str([pl.col("suite"), pl.col("key")], separator=_SEP))
    pairs = pl.DataFrame(
        [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]],
        schema={"policy": pl.String, "opponent": pl.String},
        orient="row",
    ).with_row_index("_pair")
    pairs = pairs.with_columns(pl.col("_pair").cast(pl.String))
    keep = ["metric", "value", "errored", "skip_reason"]
    key = pl.format("{}{}{}", "_pair", pl.lit(_SEP), "_key").alias("key")
    cand = base.join(pairs, left_on="agent", right_on="policy").select(
        pl.col("_pair").alias("run_id"), key, *keep
    )
    ref = base.join(pairs, left_on="agent", right_on="opponent").select(
        pl.lit("\x00ref").alias("run_id"), key, *keep
    )
    out = compare_scores(
        pl.concat([cand, ref]), candidates=pairs["_pair"].to_list(), parent="\x00ref",
        metrics=["success"], family="level", errors="exclude",
    ).filter(pl.col("level") == "overall")  # fmt: skip
    return out.join(pairs, left_on="candidate", right_on="_pair").rename(
        {"candidate_wins": "wins", "parent_wins": "losses"}
    )


@pytest.fixture(scope="module")
def scores() -> pl.DataFrame:
    return _binary_scores()


@pytest.fixture(scope="module")
def ranking(scores: pl.DataFrame) -> Ranking:
    return rank_policies(scores, policy="agent", strata=["suite"], errors="exclude")


@pytest.mark.slow
def test_fifty_policies_equal_the_engine_pair_by_pair(
    scores: pl.DataFrame, ranking: Ranking
) -> None:
    """1,225 pairs: counts, intervals, p-values, Holm over the matrix and verdicts."""
    names = list(ranking.policies)
    # the one wording that differs: the family is named for a ranking
    family = pl.col("verdict_note").str.replace(
        "every candidate's overall row(s)", "every pair of the ranking", literal=True
    )
    want = _engine_matrix(scores, names).with_columns(family).sort("policy", "opponent")
    got = ranking.matrix.with_columns(pl.col(pl.Categorical).cast(pl.String)).sort(
        "policy", "opponent"
    )
    assert got.height == want.height == N_POLICIES * (N_POLICIES - 1) // 2
    assert got["policy"].to_list() == want["policy"].to_list()
    assert got["opponent"].to_list() == want["opponent"].to_list()
    for col in COMPARED:
        a, b = got[col], want[col]
        if a.dtype.is_float():
            assert np.allclose(a.to_numpy(), b.to_numpy(), rtol=1e-9, atol=1e-12,
                               equal_nan=True), col  # fmt: skip
        else:
            assert a.cast(pl.String).to_list() == b.cast(pl.String).to_list(), col
    # some pairs are separated, so the rank sets and groups have something to show
    assert 0 < got["verdict"].is_in(["improved", "regressed"]).sum() < got.height


def test_rank_sets_tie_groups_and_strengths_follow_the_matrix(ranking: Ranking) -> None:
    names = list(ranking.policies)
    m = ranking.matrix.with_columns(pl.col(pl.Categorical).cast(pl.String))
    idx = {n: i for i, n in enumerate(names)}
    n = len(names)
    wins = np.zeros((n, n))
    separated = np.zeros((n, n), dtype=bool)
    above = dict.fromkeys(names, 0)
    below = dict.fromkeys(names, 0)
    for r in m.iter_rows(named=True):
        i, j = idx[r["policy"]], idx[r["opponent"]]
        wins[i, j], wins[j, i] = r["wins"], r["losses"]
        if r["verdict"] in ("improved", "regressed"):
            separated[i, j] = separated[j, i] = True
            hi, lo = (r["policy"], r["opponent"]) if r["verdict"] == "improved" else (
                r["opponent"], r["policy"])  # fmt: skip
            above[lo] += 1
            below[hi] += 1
    ranks = ranking.ranks
    for row in ranks.iter_rows(named=True):
        assert row["rank_best"] == 1 + above[row["policy"]]
        assert row["rank_worst"] == n - below[row["policy"]]
    theta = bradley_terry(wins)
    got = dict(zip(ranking.strengths["policy"], ranking.strengths["strength"], strict=True))
    assert [got[p] for p in names] == pytest.approx(theta, abs=1e-9)
    # ranks by strength; tie groups: contiguous, none separated inside, each new group's
    # first policy separated from some member of the group before it
    assert ranks["strength"].is_sorted(descending=True)
    order = [idx[p] for p in ranks["policy"]]
    groups = ranks["tie_group"].to_numpy()
    assert groups[0] == 1 and (np.diff(groups) >= 0).all() and (np.diff(groups) <= 1).all()
    for g in np.unique(groups):
        members = [order[k] for k in np.flatnonzero(groups == g)]
        assert not separated[np.ix_(members, members)].any()
        nxt = np.flatnonzero(groups == g + 1)
        if nxt.size:
            assert separated[order[nxt[0]], members].any()
    assert groups.max() > 1


def test_tie_groups_by_hand() -> None:
    """0 and 1 tie, 2 is separated from 0 (not from 1): a new group at 2; 3 ties with 2."""
    sep = np.zeros((4, 4), dtype=bool)
    sep[0, 2] = sep[2, 0] = True
    assert _tie_groups(sep).tolist() == [1, 1, 2, 2]
    assert _tie_groups(np.zeros((3, 3), dtype=bool)).tolist() == [1, 1, 1]
    every = ~np.eye(3, dtype=bool)
    assert _tie_groups(every).tolist() == [1, 2, 3]


def test_top_and_submatrix(ranking: Ranking) -> None:
    top = ranking.top(3)
    assert (top["rank_best"] <= 3).all() and top.height >= 3
    assert top["surely_top"].to_list() == (top["rank_worst"] <= 3).to_list()
    best = ranking.ranks["policy"].head(5).to_list()
    sub = ranking.submatrix(best)
    assert sub.height == 10
    assert set(sub["policy"].cast(pl.String)) | set(sub["opponent"].cast(pl.String)) == set(best)
    with pytest.raises(ValueError, match="k must be >= 1"):
        ranking.top(0)


def test_a_few_pairs_one_by_one(scores: pl.DataFrame, ranking: Ranking) -> None:
    """Pairs compared alone (their own family) give the same counts, means, interval and
    unadjusted p-values as their row of the matrix."""
    m = ranking.matrix.with_columns(pl.col(pl.Categorical).cast(pl.String))
    frame = scores.with_columns(key=pl.concat_str(["suite", "key"], separator="/"),
                                run_id="agent")  # fmt: skip
    for a, b in [("p00", "p49"), ("p10", "p11"), ("p30", "p07")]:
        one = compare_scores(frame, candidates=a, parent=b, errors="exclude").row(0, named=True)
        row = m.filter(
            ((pl.col("policy") == a) & (pl.col("opponent") == b))
            | ((pl.col("policy") == b) & (pl.col("opponent") == a))
        ).row(0, named=True)
        sign = 1 if row["policy"] == a else -1
        assert row["n_pairs"] == one["n_pairs"]
        assert row["mean_diff"] == pytest.approx(sign * one["mean_diff"], abs=1e-12)
        lo, hi = (row["ci_low"], row["ci_high"]) if sign == 1 else (-row["ci_high"],
                                                                    -row["ci_low"])  # fmt: skip
        assert (lo, hi) == pytest.approx((one["ci_low"], one["ci_high"]), abs=1e-9)
        better = row["p_value"] if sign == 1 else row["p_worse"]
        assert better == pytest.approx(one["p_value"], rel=1e-9)


def _numeric_scores(n: int = 6, keys: int = 25) -> pl.DataFrame:
    """Steps-like values (lower is better) with two epochs on some keys, sorted by key."""
    rng = np.random.default_rng(4)
    agent, key, epoch = np.meshgrid(np.arange(n), np.arange(keys), [0, 1], indexing="ij")
    keep = (epoch == 0) | (key % 4 == 0)
    agent, key, epoch = agent[keep], key[keep], epoch[keep]
    value = rng.poisson(20 + 2 * agent).astype(float)
    value[rng.random(value.size) < 0.05] = np.nan
    return pl.DataFrame(
        {
            "agent": [f"a{a}" for a in agent],
            "key": [f"k{k:02d}" for k in key],
            "epoch": epoch,
            "metric": "steps",
            "value": value,
        }
    ).with_columns(pl.col("value").fill_nan(None), run_id="agent")


def test_numeric_pairs_bootstrap_as_the_engine_does() -> None:
    """A metric to minimize, epochs reduced by their mean: each pair's percentile bootstrap
    reads its differences in key order, as the engine reads a frame sorted by key."""
    scores = _numeric_scores()
    r = rank_policies(scores, policy="agent", metric="steps", n_resamples=2000)
    m = r.matrix.with_columns(pl.col(pl.Categorical).cast(pl.String))
    assert (m["direction"] == "minimize").all() and (m["ci_method"] == "percentile").all()
    for row in m.iter_rows(named=True):
        one = compare_scores(
            scores, candidates=row["policy"], parent=row["opponent"], n_resamples=2000
        ).row(0, named=True)
        for col in ("n_pairs", "mean_diff", "ci_low", "ci_high", "p_value", "p_worse"):
            assert row[col] == pytest.approx(one[col], rel=1e-12, abs=1e-12), col
        assert (row["wins"], row["losses"]) == (one["candidate_wins"], one["parent_wins"])
    # lower steps win: the first policy (fewest steps) is the strongest
    assert r.ranks["policy"][0] == "a0"


def test_counts_of_a_tiny_matrix_by_hand() -> None:
    """Three policies, three keys: NaN abstains, a missing row is absent."""
    frame = pl.DataFrame(
        {
            "_pol": ["A", "B", "C", "A", "B", "A", "C"],
            "_stratum": [""] * 7,
            "_key": ["k1", "k1", "k1", "k2", "k2", "k3", "k3"],
            "value": [1.0, 0.0, None, 1.0, 1.0, 0.0, 1.0],
        }
    )
    c = pair_counts(PolicyValues.from_frame(frame, ["A", "B", "C"], "exclude"))
    # pairs (A, B), (A, C), (B, C)
    assert c.n_pairs.tolist() == [2, 1, 0]
    assert c.n_pos.tolist() == [1, 0, 0] and c.n_neg.tolist() == [0, 1, 0]
    assert c.n_matched.tolist() == [2, 2, 1]
    assert c.drop_i.tolist() == [0, 0, 0] and c.drop_j.tolist() == [0, 1, 1]
    assert c.n_11.tolist() == [1, 0, 0]
    assert c.wins.tolist() == [[0, 1, 0], [0, 0, 0], [1, 0, 0]]


def _store(root: Path) -> ha.Store:
    """Runs of three agents on two splits; agent 'v' is vla-eval (errored = failure), the
    others hylo (errored = dropped); agent 'm' has two runs per split and some epochs."""
    rng = np.random.default_rng(7)
    runs, samples, scores = [], [], []
    plan = [("a", "hylo.evallog/v0.1", 1), ("v", "vla-eval", 1), ("m", "hylo.evallog/v0.1", 2)]
    for agent, fmt, n_runs in plan:
        for split in ("s1", "s2"):
            for r in range(n_runs):
                run = f"{agent}-{split}-{r}"
                runs.append({"run_id": run, "source_format": fmt, "source_path": f"/x/{run}",
                             "benchmark_id": "b", "benchmark_digest": "sha256:d", "split": split,
                             "agent_name": agent, "agent_version": "1", "status": "success"})  # fmt: skip
                for k in range(30):
                    epochs = 2 if (agent == "m" and k % 5 == 0) else 1
                    for epoch in range(1, epochs + 1):
                        err = rng.random() < 0.1
                        ident = {"run_id": run, "key": f"t#{k}", "task_id": "t", "seed": k,
                                 "epoch": epoch, "episode_id": f"{run}-{k}-{epoch}"}  # fmt: skip
                        samples.append({**ident, "status": "error" if err else "success",
                                        "trace_status": "none"})  # fmt: skip
                        value = None if err else float(rng.random() < 0.3 + 0.2 * (agent == "v"))
                        scores.append({**ident, "metric": "success", "value": value,
                                       "valid": value is not None,
                                       "skip_reason": "errored" if err else None,
                                       "source": "evallog", "source_kind": "imported",
                                       "scorer_version": ""})  # fmt: skip
    store = ha.open_store(root)
    with store.parquet.lock():
        store.parquet.commit(
            {
                "runs": pa.Table.from_pylist(runs),
                "samples": pa.Table.from_pylist(samples),
                "scores": pa.Table.from_pylist(scores),
            }
        )
    return store


@pytest.mark.parametrize("errors", [None, "failure", "exclude"])
@pytest.mark.parametrize("reducer", ["mean", "max"])
def test_the_store_reader_equals_the_frame_path(
    tmp_path: Path, errors: str | None, reducer: str
) -> None:
    """Each run's harness convention (or the override), epochs and a policy's two runs of
    one key reduced together, keys paired within a split: one query == the frame."""
    from hylo_analytics.resolution import preferred_scores

    store = _store(tmp_path / "s")
    kw = {"errors": errors, "reducer": reducer, "strength_ci": "sandwich"}
    got = store.rank(policy="agent_name", strata=["split"], **kw)  # type: ignore[arg-type]
    runs = store.sql("select run_id, agent_name, split, source_format from stg_runs")
    frame = preferred_scores(store.parquet).join(runs, on="run_id")
    want = rank_policies(frame, policy="agent_name", strata=["split"], **kw)  # type: ignore[arg-type]
    cast = pl.col(pl.Categorical).cast(pl.String)
    assert_equal(got.matrix.with_columns(cast), want.matrix.with_columns(cast))
    assert_equal(got.ranks, want.ranks)
    expected = {None: "mixed", "failure": "failure", "exclude": "exclude"}[errors]
    assert set(got.matrix["errors"].cast(pl.String)) == {expected}
    with pytest.raises(ValueError, match="several rows"):
        store.rank(policy="agent_name", strata=["split"], reducer=None)


def test_a_selector_names_a_policy(tmp_path: Path) -> None:
    """rank --run agent=m: both of m's runs on each split, with another agent's."""
    store = _store(tmp_path / "s")
    r = store.rank(["agent=m", "agent=a"], policy="agent_name", strata=["split"])
    assert list(r.policies) == ["a", "m"]
    assert r.matrix["n_pairs"].item() > 0


def test_charts_of_many_policies_stay_bounded(tmp_path: Path) -> None:
    """60 policies: the heatmap refuses more than 50 and draws the top 50's submatrix (2,450
    cells, no text); the strength chart draws the 50 strongest with their tie groups, and
    says how many it shows."""
    from PIL import Image

    from hylo_analytics import charts
    from hylo_analytics.charts.ranking import MAX_POLICIES

    r = rank_policies(_binary_scores(60, seed=1), policy="agent", strata=["suite"])
    with pytest.raises(ValueError, match="at most 50"):
        charts.ranking_matrix(r.matrix)
    best = r.ranks["policy"].head(MAX_POLICIES).to_list()
    heat = charts.ranking_matrix(r.submatrix(best), order=best).to_dict()
    assert len(heat["data"]["values"]) == MAX_POLICIES * (MAX_POLICIES - 1)
    assert [layer["mark"]["type"] for layer in heat["layer"]] == ["rect"]
    strengths = charts.strength_intervals(r.ranks)
    spec = strengths.to_dict()
    rows = spec["layer"][0]["data"]["values"]
    assert len(rows) == MAX_POLICIES
    assert "the 50 strongest of 60 policies" in spec["title"]["subtitle"]
    assert "sandwich interval" in spec["title"]["subtitle"]
    groups = {row["tie_group"] for row in rows}
    assert groups == set(r.ranks["tie_group"].head(MAX_POLICIES).to_list())
    png = charts.save(strengths, tmp_path / "s.png")
    pixels = np.asarray(Image.open(png).convert("L"), dtype=float)
    assert pixels.shape[0] > 800 and pixels.std() > 10


def test_hostile_policy_names_are_cut_in_the_charts() -> None:
    from hylo_analytics import charts
    from hylo_analytics.charts._style import LABEL_CHARS

    hostile = "<script>alert(1)</script>\u202e" + "x" * 500
    scores = _binary_scores(3).with_columns(pl.col("agent").replace({"p00": hostile}))
    r = rank_policies(scores, policy="agent", strata=["suite"])
    for chart in (charts.strength_intervals(r.ranks), charts.ranking_matrix(r.matrix)):
        spec = chart.to_dict()
        rows = spec["data"]["values"] if "data" in spec else spec["layer"][0]["data"]["values"]
        names = {v["policy"] for v in rows}
        assert all(len(n) <= LABEL_CHARS for n in names)
        assert not any("\u202e" in n for n in names)


def test_a_policy_sharing_no_key_is_said_and_has_no_interval() -> None:
    """A policy alone on its suite (an aggregate of counts, a suite nobody else ran) plays no
    game: it has no strength (not the prior's 0) nor a (zero-width) interval, it comes after
    the policies the keys place, and a note says so."""
    scores = _binary_scores(3).filter(pl.col("suite") == "s1")
    alone = scores.filter(pl.col("agent") == "p00").with_columns(
        agent=pl.lit("solo"), suite=pl.lit("s9")
    )
    r = rank_policies(pl.concat([scores, alone]), policy="agent", strata=["suite"])
    solo = r.strengths.filter(pl.col("policy") == "solo").row(0, named=True)
    assert (solo["wins"], solo["losses"]) == (0, 0)
    assert solo["strength"] is None
    assert solo["strength_low"] is None and solo["strength_high"] is None
    assert r.ranks.filter(pl.col("policy") == "solo")["rank_set"].item() == "1-4"
    assert r.ranks["policy"][-1] == "solo"
    assert r.notes and "(solo) share no key with any other" in r.notes[0]
