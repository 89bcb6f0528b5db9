"""rank_policies: the matrix is the engine's pairs with Holm over the whole matrix, the rank
sets follow the stated rule, the strengths are the Bradley-Terry fit of the matrix's wins,
and relabelling / swapping outcomes act as they must."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from hylo_analytics.compare import compare_scores
from hylo_analytics.compare.ranking import Ranking, rank_policies
from hylo_analytics.stats import holm
from hylo_analytics.stats.bradley_terry import bradley_terry

RESAMPLES = 300


def _scores() -> pl.DataFrame:
    """Three policies on two suites of 40 keys (the same key names in both suites): A never
    loses; B beats C on 2 keys a suite and loses none, too few to separate them."""
    n = 40
    i = np.arange(n)
    values = {
        "A": np.ones(n),
        "B": ((i < 2) | (i >= 24)).astype(float),  # fails 22 keys
        "C": (i >= 24).astype(float),  # fails 24 keys
    }
    frames = [
        pl.DataFrame(
            {
                "agent": p,
                "suite": s,
                "key": [f"k{k}" for k in i],
                "metric": "success",
                "value": v if s == "s1" else np.roll(v, 3),
            }
        )
        for p, v in values.items()
        for s in ("s1", "s2")
    ]
    return pl.concat(frames).with_columns(run_id=pl.format("{}-{}", "agent", "suite"))


@pytest.fixture(scope="module")
def ranking() -> Ranking:
    return rank_policies(_scores(), policy="agent", strata=["suite"], n_resamples=RESAMPLES)


def test_the_matrix_is_the_engine_pair_by_pair(ranking: Ranking) -> None:
    scores = _scores().with_columns(key=pl.format("{}/{}", "suite", "key"))
    m = ranking.matrix
    assert m.select("policy", "opponent").rows() == [("A", "B"), ("A", "C"), ("B", "C")]
    for row in m.iter_rows(named=True):
        one = compare_scores(
            scores.with_columns(run_id="agent"), candidates=row["policy"], parent=row["opponent"]
        ).row(0, named=True)
        assert row["n_pairs"] == one["n_pairs"] == 80  # keys pair within a suite
        assert (row["wins"], row["losses"]) == (one["candidate_wins"], one["parent_wins"])
        assert row["mean_diff"] == pytest.approx(one["mean_diff"])
        assert (row["p_value"], row["p_worse"]) == pytest.approx((one["p_value"], one["p_worse"]))
    # one family: all three pairs, Holm in each direction
    assert m["family_size"].to_list() == [3, 3, 3]
    family = np.zeros(3, dtype=int)
    assert m["p_holm"].to_numpy() == pytest.approx(holm(m["p_value"].to_numpy(), family))
    assert m["p_worse_holm"].to_numpy() == pytest.approx(holm(m["p_worse"].to_numpy(), family))
    assert m["verdict"].to_list() == ["improved", "improved", "inconclusive"]


def test_rank_sets(ranking: Ranking) -> None:
    """best = 1 + separated above, worst = N - separated below, from the verdicts."""
    m = ranking.matrix
    sep = {(r["policy"], r["opponent"]): r["verdict"] for r in m.iter_rows(named=True)}
    r = {row["policy"]: row for row in ranking.ranks.iter_rows(named=True)}
    for p in "ABC":
        above = sum(
            (a == p and v == "regressed") or (b == p and v == "improved")
            for (a, b), v in sep.items()
        )
        below = sum(
            (a == p and v == "improved") or (b == p and v == "regressed")
            for (a, b), v in sep.items()
        )
        assert (r[p]["rank_best"], r[p]["rank_worst"]) == (1 + above, 3 - below)
    # A is first for sure; B and C are not separated: they share ranks 2-3
    assert ranking.ranks["rank_set"].to_list() == ["1", "2-3", "2-3"]
    assert ranking.ranks["policy"].to_list() == ["A", "B", "C"]
    assert ranking.ranks["rank"].to_list() == [1, 2, 3]


def test_strengths_are_the_fit_of_the_matrix_wins(ranking: Ranking) -> None:
    names = list(ranking.policies)
    wins = np.zeros((3, 3))
    for row in ranking.matrix.iter_rows(named=True):
        i, j = names.index(row["policy"]), names.index(row["opponent"])
        wins[i, j], wins[j, i] = row["wins"], row["losses"]
    s = ranking.strengths
    assert s["strength"].to_numpy() == pytest.approx(bradley_terry(wins), abs=1e-9)
    assert s["strength"].sum() == pytest.approx(0.0, abs=1e-12)
    assert (s["wins"].to_numpy() == wins.sum(1)).all()
    assert (s["losses"].to_numpy() == wins.sum(0)).all()
    assert (s["strength_low"] <= s["strength"]).all() and (
        s["strength"] <= s["strength_high"]
    ).all()
    # A never loses: finite, through the penalty
    assert s.filter(pl.col("policy") == "A")["losses"].item() == 0
    assert np.isfinite(s["strength_high"].to_numpy()).all()
    assert s["mean"].to_list() == pytest.approx([1.0, 0.45, 0.4])


def test_relabelling_permutes_and_swapping_negates(ranking: Ranking) -> None:
    scores = _scores()
    relabelled = rank_policies(
        scores.with_columns(pl.col("agent").replace({"A": "z", "B": "x", "C": "y"})),
        policy="agent",
        strata=["suite"],
        n_resamples=RESAMPLES,
    )
    got = dict(zip(relabelled.strengths["policy"], relabelled.strengths["strength"], strict=True))
    want = dict(zip(ranking.strengths["policy"], ranking.strengths["strength"], strict=True))
    assert [got["z"], got["x"], got["y"]] == pytest.approx([want["A"], want["B"], want["C"]])
    swapped = rank_policies(
        scores.with_columns(value=1 - pl.col("value")),
        policy="agent",
        strata=["suite"],
        n_resamples=RESAMPLES,
    )
    assert swapped.strengths["strength"].to_numpy() == pytest.approx(
        -ranking.strengths["strength"].to_numpy(), abs=1e-9
    )
    assert swapped.ranks["policy"].to_list() == ["C", "B", "A"]


def test_the_bootstrap_is_seeded_and_within_suites() -> None:
    kw = {"policy": "agent", "strata": ["suite"], "n_resamples": RESAMPLES,
          "strength_ci": "bootstrap"}  # fmt: skip
    a, b = rank_policies(_scores(), seed=1, **kw), rank_policies(_scores(), seed=1, **kw)
    assert a.strengths.equals(b.strengths)
    c = rank_policies(_scores(), seed=2, **kw)
    assert not c.strengths["strength_low"].equals(a.strengths["strength_low"])


def test_errors_policy_passes_through() -> None:
    """An errored episode is a failure under 'failure' and a dropped pair under 'exclude'."""
    scores = _scores().with_columns(errored=pl.lit(False))
    hit = (pl.col("agent") == "A") & (pl.col("suite") == "s1") & (pl.col("key") == "k1")
    scores = scores.with_columns(value=pl.when(hit).then(None).otherwise("value"), errored=hit)
    kw = {"policy": "agent", "strata": ["suite"], "n_resamples": RESAMPLES}
    failing = rank_policies(scores, errors="failure", **kw).matrix.row(0, named=True)
    excluded = rank_policies(scores, errors="exclude", **kw).matrix.row(0, named=True)
    assert (failing["errors"], failing["n_pairs"], excluded["n_pairs"]) == ("failure", 80, 79)
    assert failing["losses"] == 1 and excluded["losses"] == 0  # B succeeds on s1/k1


def test_refusals_and_html(ranking: Ranking) -> None:
    with pytest.raises(ValueError, match="at least two policies"):
        rank_policies(_scores(), policy="agent", policies=["A"])
    with pytest.raises(ValueError, match=r"no scores of 'success' for policies \['D'\]"):
        rank_policies(_scores(), policy="agent", policies=["A", "D"])
    with pytest.raises(ValueError, match=r"lack column\(s\) \['team'\]"):
        rank_policies(_scores(), policy="team")
    page = ranking._repr_html_()
    assert "<table" in page and "Bradley-Terry" in page and "<td>1-3</td>" not in page
    assert "<td>2-3</td>" in page and "<td>A vs C</td>" in page


def test_charts_render(ranking: Ranking, tmp_path: Path) -> None:
    """The heatmap draws every pair twice (mirrored) and both charts render to PNG."""
    from PIL import Image

    from hylo_analytics import charts

    heat = charts.ranking_matrix(ranking.matrix, order=ranking.ranks["policy"].to_list())
    spec = heat.to_dict()
    rect = spec["layer"][0]
    rows = {(c["policy"], c["opponent"]): c for c in spec["data"]["values"]}
    assert len(rows) == 6 and rect["mark"]["type"] == "rect"
    assert rows[("A", "C")]["verdict"] == "improved" and rows[("C", "A")]["verdict"] == "regressed"
    assert rows[("C", "A")]["mean_diff"] == pytest.approx(-rows[("A", "C")]["mean_diff"])
    assert rows[("C", "A")]["label"] == "-60.0 pts" and rows[("A", "C")]["record"] == "48 : 0"
    for name, chart in (("heat", heat), ("strengths", charts.strength_intervals(ranking.ranks))):
        png = charts.save(chart, tmp_path / f"{name}.png")
        pixels = np.asarray(Image.open(png).convert("L"), dtype=float)
        assert pixels.shape[1] > 300 and pixels.std() > 10 and (pixels < 128).mean() > 0.005
    with pytest.raises(ValueError, match="lacks column"):
        charts.strength_intervals(ranking.matrix)


def test_policies_sharing_no_key_are_not_separated() -> None:
    """A and B ran on different suites: their pair has no pairs, and ranks stay open."""
    scores = pl.DataFrame(
        {
            "agent": ["A"] * 4 + ["B"] * 4 + ["C"] * 4,
            "suite": ["s1"] * 4 + ["s2"] * 4 + ["s1", "s1", "s2", "s2"],
            "key": ["k0", "k1", "k2", "k3"] * 3,
            "metric": "success",
            "value": [1.0, 1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0],
        }
    )
    r = rank_policies(scores, policy="agent", strata=["suite"], n_resamples=50)
    ab = r.matrix.row(0, named=True)
    assert (ab["n_pairs"], ab["verdict"], ab["verdict_note"]) == (0, "inconclusive",
                                                                   "no pairs to compare")  # fmt: skip
    assert r.ranks["rank_set"].to_list() == ["1-3"] * 3


def test_resampled_counts_are_keys_drawn_within_their_suite() -> None:
    """Each decisive key is drawn Binomial(n_suite, 1 / n_suite) times (mean 1, variance
    1 - 1 / n), and a suite's draws never exceed its size."""
    from hylo_analytics.compare.ranking import _resample_counts

    stratum = np.repeat([0, 1], [10, 30])
    decisive = np.zeros(40, dtype=bool)
    decisive[[0, 3, 12, 39]] = True
    counts = _resample_counts(stratum, decisive, 20_000, np.random.default_rng(0))
    assert counts.shape == (20_000, 4)
    assert counts.mean(axis=0) == pytest.approx([1, 1, 1, 1], abs=0.03)
    assert counts.var(axis=0) == pytest.approx([0.9, 0.9, 29 / 30, 29 / 30], abs=0.04)
    assert counts[:, :2].sum(axis=1).max() <= 10 and counts[:, 2:].sum(axis=1).max() <= 30
    # two keys of one suite compete for its draws: negatively correlated (-1 / n)
    assert np.cov(counts[:, 0], counts[:, 1])[0, 1] == pytest.approx(-0.1, abs=0.03)
