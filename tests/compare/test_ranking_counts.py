"""A ranking from counts: policies that share no key (a harness's published "k of n") are
compared by their rates as independent samples, with the Miettinen-Nurminen score interval and
test of :mod:`hylo_analytics.stats.unpaired` (the z test of the suites' averaged difference
across several suites), Holm over the matrix, and ordered by mean. The numbers are checked
against the stats functions and scipy, at 300 policies and through a store of Every Eval Ever
aggregates."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats

import hylo_analytics as ha
from hylo_analytics.compare.ranking import rank_policies
from hylo_analytics.compare.verdicts import StatisticalRule
from hylo_analytics.stats import holm
from hylo_analytics.stats.unpaired import score_diff_ci, score_diff_p

sys.path.insert(0, str(Path(__file__).parents[1] / "ingest"))
from test_ingest_every_eval_ever import _aggregate

ADJ = 1 - 0.1 / 3  # the verdict's level: one-sided alpha 0.05, Bonferroni over 3 pairs


def _counted(counts: dict[str, dict[str, tuple[int, int]]]) -> pl.DataFrame:
    """Counted rows as the store keeps them: ``k`` ones and ``n - k`` zeros per policy and
    suite, each key the run's own."""
    frames = []
    for policy, suites in counts.items():
        for suite, (k, n) in suites.items():
            frames.append(pl.DataFrame({
                "run_id": policy, "suite": suite, "metric": "success",
                "key": [f"t#counted:{i}@{policy}/{suite}" for i in range(n)],
                "value": (np.arange(n) < k).astype(float),
            }))  # fmt: skip
    return pl.concat(frames)


def test_rates_of_one_suite_are_the_score_test_with_holm_and_verdicts() -> None:
    counts = {"a": (45, 50), "b": (31, 50), "c": (29, 48)}
    r = rank_policies(_counted({p: {"s": c} for p, c in counts.items()}), strata=["suite"])
    m = r.matrix.sort("policy", "opponent")
    assert m.height == 3 and set(m["n_pairs"]) == {0}
    assert set(m["test"].cast(pl.String)) == {"miettinen-nurminen score (unpaired)"}
    p_up = []
    for row in m.iter_rows(named=True):
        (k1, n1), (k2, n2) = counts[row["policy"]], counts[row["opponent"]]
        assert row["mean_policy"] == pytest.approx(k1 / n1)
        assert row["mean_diff"] == pytest.approx(k1 / n1 - k2 / n2)
        lo, hi = score_diff_ci(k1, n1, k2, n2, 0.95)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((float(lo), float(hi)))
        lo, hi = score_diff_ci(k1, n1, k2, n2, ADJ)
        assert (row["ci_adj_low"], row["ci_adj_high"]) == pytest.approx((float(lo), float(hi)))
        assert row["p_value"] == pytest.approx(float(score_diff_p(k1, n1, k2, n2)))
        assert row["p_worse"] == pytest.approx(float(score_diff_p(k1, n1, k2, n2, 0, "less")))
        assert row["p_mcnemar"] is None  # no pairs, no sign test
        p_up.append(row["p_value"])
    assert m["p_holm"].to_list() == pytest.approx(holm(np.array(p_up)).tolist())
    verdicts = dict(zip(zip(m["policy"].cast(pl.String), m["opponent"].cast(pl.String), strict=False),
                        m["verdict"].cast(pl.String), strict=True))  # fmt: skip
    # 90% beats 62% and 60%; 62% vs 60% is not separated
    assert verdicts == {("a", "b"): "improved", ("a", "c"): "improved",
                        ("b", "c"): "inconclusive"}  # fmt: skip
    ranks = r.ranks
    assert ranks["policy"].to_list() == ["a", "b", "c"]  # by mean
    assert ranks["rank_set"].to_list() == ["1", "2-3", "2-3"]
    assert ranks["tie_group"].to_list() == [1, 2, 2]
    assert ranks["strength"].null_count() == 3  # no games: no strength is fitted
    (note,) = r.notes
    assert "compared by their rates" in note and "Miettinen-Nurminen" in note


def test_an_equivalence_margin_tests_the_rates_too() -> None:
    counts = {"a": (500, 1000), "b": (505, 1000)}
    rule = StatisticalRule(margin=0.1)
    r = rank_policies(_counted({p: {"s": c} for p, c in counts.items()}), strata=["suite"],
                      rule=rule)  # fmt: skip
    row = r.matrix.row(0, named=True)
    want = max(score_diff_p(500, 1000, 505, 1000, -0.1, "greater"),
               score_diff_p(500, 1000, 505, 1000, 0.1, "less"))  # fmt: skip
    assert row["p_tost"] == pytest.approx(float(want))
    assert row["verdict"] == "unchanged"


def test_several_suites_average_their_differences() -> None:
    counts = {
        "a": {"s1": (40, 50), "s2": (30, 60), "s3": (9, 10)},
        "b": {"s1": (30, 50), "s2": (33, 60)},  # s3 not run: only s1 and s2 are shared
    }
    r = rank_policies(_counted(counts), strata=["suite"])
    row = r.matrix.row(0, named=True)
    pa = [40 / 50, 30 / 60]
    pb = [30 / 50, 33 / 60]
    diff = float(np.mean(np.subtract(pa, pb)))
    se = float(
        np.sqrt(sum(p * (1 - p) / n for p, n in zip(pa + pb, [50, 60, 50, 60], strict=False))) / 2
    )
    assert row["test"] == "z (unpaired)"
    assert row["mean_policy"] == pytest.approx(np.mean(pa))
    assert row["mean_diff"] == pytest.approx(diff)
    assert row["p_value"] == pytest.approx(stats.norm.sf(diff / se))
    z = stats.norm.ppf(0.975)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((diff - z * se, diff + z * se))


def test_three_hundred_policies_rank_from_their_counts() -> None:
    rng = np.random.default_rng(7)
    n_pol = 300
    ns = rng.integers(50, 400, n_pol)
    ks = rng.binomial(ns, rng.uniform(0.2, 0.9, n_pol))
    names = [f"p{i:03d}" for i in range(n_pol)]
    frame = _counted({p: {"s": (int(k), int(n))} for p, k, n in zip(names, ks, ns, strict=True)})
    r = rank_policies(frame, strata=["suite"])
    m = r.matrix
    assert m.height == n_pol * (n_pol - 1) // 2
    assert set(m["test"].cast(pl.String)) == {"miettinen-nurminen score (unpaired)"}
    idx = {p: i for i, p in enumerate(names)}
    i = np.array([idx[p] for p in m["policy"].cast(pl.String)])
    j = np.array([idx[p] for p in m["opponent"].cast(pl.String)])
    want = score_diff_p(ks[i], ns[i], ks[j], ns[j])
    np.testing.assert_allclose(m["p_value"].to_numpy(), want, rtol=1e-9, atol=1e-300)
    rates = ks / ns
    assert r.ranks["policy"].to_list() == [names[t] for t in np.argsort(-rates, kind="stable")]
    # the rank sets count the verdicts: n_above is the pairs that found a policy worse
    v = m["verdict"].cast(pl.String).to_numpy()
    above = np.bincount(j[v == "improved"], minlength=n_pol) + np.bincount(
        i[v == "regressed"], minlength=n_pol
    )
    got = dict(zip(r.ranks["policy"], r.ranks["n_above"], strict=True))
    assert [got[p] for p in names] == above.tolist()
    assert (r.ranks["rank_best"] <= r.ranks["rank"]).all()
    assert (r.ranks["rank"] <= r.ranks["rank_worst"]).all()
    assert r.ranks["n_above"].sum() > 10_000  # most of the 44,850 pairs are separated


def test_lower_is_better_orders_and_decides_the_other_way() -> None:
    counts = {"a": (45, 50), "b": (5, 50)}
    r = rank_policies(_counted({p: {"s": c} for p, c in counts.items()}), strata=["suite"],
                      directions={"success": "minimize"})  # fmt: skip
    assert r.ranks["policy"].to_list() == ["b", "a"]
    assert r.matrix.row(0, named=True)["verdict"] == "regressed"  # a's rate is the worse


def test_keyed_policies_rank_first_and_counted_ones_after_by_mean() -> None:
    n = 30
    keyed = pl.concat([
        pl.DataFrame({"run_id": p, "suite": "s", "metric": "success",
                      "key": [f"k{i}" for i in range(n)], "value": v})
        for p, v in (("x", np.ones(n)), ("y", (np.arange(n) < 10).astype(float)))
    ])  # fmt: skip
    frame = pl.concat([keyed, _counted({"c1": {"s": (29, 30)}, "c2": {"s": (3, 30)}})])
    r = rank_policies(frame, strata=["suite"])
    assert r.ranks["policy"].to_list() == ["x", "y", "c1", "c2"]
    assert r.ranks.filter(pl.col("policy").is_in(["c1", "c2"]))["strength"].null_count() == 2
    cross = r.matrix.filter(pl.col("policy").cast(pl.String).is_in(["c1", "c2"])
                            ^ pl.col("opponent").cast(pl.String).is_in(["c1", "c2"]))  # fmt: skip
    assert set(cross["verdict"].cast(pl.String)) == {"inconclusive"}  # nothing pairs them
    assert not cross["test"].cast(pl.String).str.ends_with("(unpaired)").any()
    (note,) = r.notes
    assert "after the policies the keys rank" in note


def test_figures_without_a_count_get_no_test() -> None:
    frame = pl.DataFrame({"run_id": ["a", "b"], "suite": "s", "metric": "f1",
                          "key": ["t#summary@a", "t#summary@b"], "value": [0.8, 0.4]})  # fmt: skip
    r = rank_policies(frame, strata=["suite"], metric="f1", directions={"f1": "maximize"})
    assert r.ranks["policy"].to_list() == ["a", "b"]
    assert r.ranks["rank_set"].to_list() == ["1-2", "1-2"]
    assert r.matrix["p_value"].to_list() != [None]  # the sign test of no pairs: p = 1
    (note,) = r.notes
    assert "no test can place them" in note


def test_a_store_of_published_counts_ranks_from_them(tmp_path: Path) -> None:
    """Every Eval Ever aggregates without instances: the count is num_samples and the
    direction the file's lower_is_better; rank orders and separates them, compare refuses."""
    (tmp_path / "in").mkdir()
    for score in (0.9, 0.62, 0.6, 0.3):
        doc = _aggregate({}, score=score)
        doc["evaluation_results"][0]["score_details"]["uncertainty"]["num_samples"] = 200
        (tmp_path / "in" / f"{score}.json").write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "store")
    store.ingest(tmp_path / "in", progress=False)
    r = store.rank(metric="score")
    assert r.ranks["policy"].to_list() == [f"acme/m-{s}" for s in (0.9, 0.62, 0.6, 0.3)]
    assert r.ranks["rank_set"].to_list() == ["1", "2-3", "2-3", "4"]
    assert set(r.matrix["direction"].cast(pl.String)) == {"maximize"}  # lower_is_better: false
    row = r.matrix.filter(pl.col("policy") == "acme/m-0.6", pl.col("opponent") == "acme/m-0.9")
    lo, hi = score_diff_ci(120, 200, 180, 200)
    assert (row["ci_low"][0], row["ci_high"][0]) == pytest.approx((float(lo), float(hi)))
    assert row["verdict"][0] == "regressed"
    with pytest.raises(ha.ComparabilityError, match=r"only as a rate of 200 samples.*\(or rank\)"):
        store.compare("agent=acme/m-0.6", "agent=acme/m-0.9", metrics=["score"])


def test_keys_duckdb_hash_gives_one_code_still_rank(tmp_path: Path) -> None:
    """DuckDB's ``hash`` gives 'Arabic#counted:106@<run 45>' and 'Arabic#counted:306@<run 47>'
    one code (a hash table's hash, not collision-free): the ranking's codes are then MD5's,
    and the two runs rank from their counts rather than being refused."""
    (tmp_path / "in").mkdir()
    for run, k in ((45, 250), (47, 300)):
        doc = _aggregate({}, score=k / 400)
        doc["evaluation_id"] = f"global-mmlu-lite/acme_model-{run:05d}/1"
        result = doc["evaluation_results"][0]
        result["evaluation_name"] = "Arabic"
        result["score_details"]["uncertainty"]["num_samples"] = 400
        (tmp_path / "in" / f"{run}.json").write_text(json.dumps(doc))
    store = ha.open_store(tmp_path / "store")
    store.ingest(tmp_path / "in", progress=False)
    keys = ("Arabic#counted:106@eee:global-mmlu-lite/acme_model-00045/1",
            "Arabic#counted:306@eee:global-mmlu-lite/acme_model-00047/1")  # fmt: skip
    stored = store.sql("select key, hash(key) as h from scores where list_contains($k, key)",
                       {"k": list(keys)})  # fmt: skip
    assert stored.height == 2 and stored["h"].n_unique() == 1  # the collision is real
    r = store.rank(policy="run_id", metric="score", progress=False)
    row = r.matrix.row(0, named=True)
    assert row["n_pairs"] == 0 and row["test"] == "miettinen-nurminen score (unpaired)"
    (k1, k2) = (250, 300) if row["policy"].endswith("00045/1") else (300, 250)
    assert row["p_value"] == pytest.approx(float(score_diff_p(k1, 400, k2, 400)))
    assert r.ranks["mean"].sort().to_list() == pytest.approx([250 / 400, 300 / 400])
