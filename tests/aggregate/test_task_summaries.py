"""task_summaries(): the cells' rates from aggregate, the IQM, profiles and P(X > Y) as frames."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from rliable import metrics as rly
from scipy import stats

from hylo_analytics.aggregate.summaries import task_summaries
from hylo_analytics.stats.summaries import ONE_RUN_NOTE

# successes out of 4 episodes, per policy, run (seed) and task
WINS = {
    ("a", "s1"): [4, 3, 2, 1, 4],
    ("a", "s2"): [3, 3, 1, 2, 4],
    ("b", "s1"): [2, 2, 1, 0, 4],
    ("b", "s2"): [1, 3, 2, 0, 3],
}


def _scores(wins: dict[tuple[str, str], list[int]], n: int = 4) -> pl.DataFrame:
    rows = [
        {"agent_name": agent, "run_id": f"{agent}-{seed}", "task_id": f"t{t}",
         "key": f"t{t}#{e}", "metric": "success", "value": float(e < k)}
        for (agent, seed), ks in wins.items() for t, k in enumerate(ks) for e in range(n)
    ]  # fmt: skip
    return pl.DataFrame(rows)


def test_iqm_mean_and_profile_of_the_cells():
    out = task_summaries(_scores(WINS), n_resamples=500, taus=[0.0, 0.5, 0.75])
    rates_a = np.array(WINS[("a", "s1")] + WINS[("a", "s2")]) / 4
    summary = out.summary.filter(pl.col("agent_name") == "a")
    iqm = summary.filter(pl.col("statistic") == "iqm").row(0, named=True)
    assert iqm["estimate"] == pytest.approx(stats.trim_mean(rates_a, 0.25))
    assert iqm["estimate"] == pytest.approx(rly.aggregate_iqm(rates_a.reshape(2, 5)))
    assert (iqm["n_tasks"], iqm["n_runs"], iqm["n_episodes"]) == (5, 2, 40)
    assert iqm["ci_low"] <= iqm["estimate"] <= iqm["ci_high"]
    assert (iqm["ci_level"], iqm["ci_method"], iqm["errors"]) == (0.95, "stratified bootstrap",
                                                                  "exclude")  # fmt: skip
    mean = summary.filter(pl.col("statistic") == "mean")["estimate"].item()
    assert mean == pytest.approx(rates_a.mean())
    prof = out.profiles.filter(pl.col("agent_name") == "a")
    assert prof["tau"].to_list() == [0.0, 0.5, 0.75]
    assert prof["fraction"].to_list() == [np.mean(rates_a > t) for t in (0.0, 0.5, 0.75)]
    assert out.summary.columns[:3] == ["agent_name", "metric", "statistic"]


def test_probability_of_improvement_over_seeds_matches_rliable():
    out = task_summaries(_scores(WINS), n_resamples=300).improvement
    assert out.height == 2 and out["note"].is_null().all()
    row = out.filter(pl.col("x") == "a").row(0, named=True)
    ma = np.array([WINS[("a", "s1")], WINS[("a", "s2")]]) / 4
    mb = np.array([WINS[("b", "s1")], WINS[("b", "s2")]]) / 4
    assert row["estimate"] == pytest.approx(rly.probability_of_improvement(ma, mb))
    assert (row["n_tasks"], row["runs_x"], row["runs_y"]) == (5, 2, 2)
    assert row["ci_low"] <= row["estimate"] <= row["ci_high"]
    back = out.filter(pl.col("x") == "b")["estimate"].item()
    assert back == pytest.approx(1 - row["estimate"])


def test_one_run_per_task_says_so_instead_of_a_number():
    one = {k: v for k, v in WINS.items() if k[1] == "s1"}
    out = task_summaries(_scores(one), n_resamples=100).improvement
    assert out["estimate"].is_null().all() and out["note"].to_list() == [ONE_RUN_NOTE] * 2
    uneven = {**WINS, ("a", "s2"): [3, 3]}  # a second seed of a on two tasks only
    note = task_summaries(_scores(uneven), n_resamples=100).improvement["note"][0]
    assert "unequal numbers of runs" in note


def test_errors_policy_and_refusals():
    scores = _scores(WINS).with_columns(
        value=pl.when(pl.col("key") == "t0#0").then(None).otherwise(pl.col("value")),
        errored=pl.col("key") == "t0#0",
    )
    # an errored first episode: a failure under "failure", left out under "exclude"
    fail = task_summaries(scores, errors="failure", n_resamples=50).summary
    excl = task_summaries(scores, errors="exclude", n_resamples=50).summary
    assert fail["n_episodes"].to_list() == [40, 40, 40, 40]
    assert excl["n_episodes"].to_list() == [38, 38, 38, 38]
    assert set(fail["errors"]) == {"failure"}
    steps = _scores(WINS).with_columns(metric=pl.lit("steps"), value=pl.col("value") * 7)
    with pytest.raises(ValueError, match="not 0/1"):
        task_summaries(steps, metric="steps")
    with pytest.raises(ValueError, match="no scores"):
        task_summaries(_scores(WINS).head(0))


def _many(groups: int, seeds: int = 2, tasks: int = 4, n: int = 6) -> pl.DataFrame:
    """``groups`` agents of graded skill, ``seeds`` runs each, ``tasks`` tasks of ``n``."""
    rng = np.random.default_rng(3)
    rows = []
    for a in range(groups):
        for s in range(seeds):
            for t in range(tasks):
                k = int(rng.binomial(n, 0.2 + 0.6 * a / max(groups - 1, 1)))
                rows += [{"agent_name": f"g{a:02d}", "run_id": f"g{a:02d}-{s}",
                          "task_id": f"t{t}", "key": f"t{t}#{e}", "metric": "success",
                          "value": float(e < k)} for e in range(n)]  # fmt: skip
    return pl.DataFrame(rows)


def test_every_group_at_once_equals_each_group_alone():
    """Twelve agents summarized together: each one's IQM, mean, profile and every pair's
    P(X > Y) are what summarizing that agent (that pair) alone gives."""
    scores = _many(12)
    out = task_summaries(scores, n_resamples=400)
    assert out.summary.height == 24 and out.improvement.height == 12 * 11 and out.notes == ()
    for agent in ("g00", "g05", "g11"):
        alone = task_summaries(scores.filter(pl.col("agent_name") == agent), n_resamples=400)
        got = out.summary.filter(pl.col("agent_name") == agent)
        assert got.equals(alone.summary)
        assert out.profiles.filter(pl.col("agent_name") == agent).equals(alone.profiles)
    pair = scores.filter(pl.col("agent_name").is_in(["g03", "g07"]))
    two = task_summaries(pair, n_resamples=400).improvement
    both = out.improvement.filter(
        pl.col("x").is_in(["g03", "g07"]), pl.col("y").is_in(["g03", "g07"])
    )
    assert both.equals(two)


def test_past_fifty_groups_the_pairs_are_those_of_the_best_fifty():
    from hylo_analytics.aggregate.summaries import MAX_PAIRED_GROUPS

    out = task_summaries(_many(60, seeds=2, tasks=3, n=4), n_resamples=100)
    assert out.summary.height == 120
    assert out.improvement.height == MAX_PAIRED_GROUPS * (MAX_PAIRED_GROUPS - 1)
    assert out.notes and "50 groups of highest IQM of 60" in out.notes[0]
    iqm = out.summary.filter(pl.col("statistic") == "iqm").sort("estimate", descending=True)
    kept = set(out.improvement["x"])
    assert set(iqm["agent_name"].head(MAX_PAIRED_GROUPS)) == kept
