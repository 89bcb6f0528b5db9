"""Pairs of policies that share no key, compared by their rates as independent samples.

A ranking's policies that no key pairs (a harness's published "45 of 200", stored as counted
rows) have no paired test; :class:`Rates` gives each pair of them, in the suites both ran,
Miettinen-Nurminen's score interval and test (one suite) or the z test of the suites'
averaged difference (several), and :func:`_with_rates` / :func:`_tost_of_rates` write them
into the matrix :func:`~hylo_analytics.compare.pairwise.pair_statistics` builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics.compare.verdicts import Rule
from hylo_analytics.stats.interval import PairedInterval, unpaired_interval
from hylo_analytics.stats.unpaired import score_diff_p

if TYPE_CHECKING:  # pairwise imports this module
    from hylo_analytics.compare.pairwise import PairCounts, PolicyValues

__all__ = ["Rates", "alone_policies"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def alone_policies(counts: PairCounts, n: int) -> npt.NDArray[np.bool_]:
    """The policies that share no key with any other (no pair has a key with both rows)."""
    shared = np.zeros(n, dtype=bool)
    met = counts.n_matched > 0
    shared[counts.i[met]] = True
    shared[counts.j[met]] = True
    return ~shared


@dataclass(frozen=True)
class Rates:
    """The valid values (``n``) and their sum (``k``) of each policy in each suite (N x S),
    whether they are all 0/1 there (``binary``), and the policies that share no key with any
    other (``alone``): those a ranking compares by rates, as independent samples."""

    k: FloatArray
    n: FloatArray
    binary: npt.NDArray[np.bool_]
    alone: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, values: PolicyValues, counts: PairCounts) -> Rates | None:
        """The rates of ``values``, or None when fewer than two policies are alone."""
        n_pol, n_st = len(values.policies), len(values.strata)
        alone = alone_policies(counts, n_pol)
        if int(alone.sum()) < 2:
            return None
        ok = ~np.isnan(values.row_value)
        cell = values.row_policy[ok] * n_st + values.key_stratum[values.row_key[ok]]
        v = values.row_value[ok]
        size = n_pol * n_st
        n = np.bincount(cell, minlength=size).reshape(n_pol, n_st).astype(np.float64)
        k = np.bincount(cell, weights=v, minlength=size).reshape(n_pol, n_st).astype(np.float64)
        odd = np.bincount(cell, weights=((v != 0) & (v != 1)).astype(np.float64),
                          minlength=size).reshape(n_pol, n_st)  # fmt: skip
        return cls(k, n, odd == 0, alone.astype(bool))

    def tested(
        self, i: IntArray, j: IntArray, levels: Sequence[float]
    ) -> tuple[npt.NDArray[np.bool_], dict[str, FloatArray], list[tuple[str, PairedInterval]]]:
        """Which pairs ``(i, j)`` are compared by rates (both alone, a suite in common, 0/1
        in each), their rates and difference (``mean_i``, ``mean_j``, ``diff``; averaged over
        the suites in common), and the interval of each kind (``score``: one suite; ``normal``:
        several) with the rows it holds."""
        use = self.alone[i] & self.alone[j]
        rows = np.flatnonzero(use)
        ii, jj = i[rows], j[rows]
        common = (self.n[ii] > 0) & (self.n[jj] > 0)
        zero_one = ~(common & ~(self.binary[ii] & self.binary[jj])).any(axis=1)
        keep = common.any(axis=1) & zero_one
        rows, ii, jj, common = rows[keep], ii[keep], jj[keep], common[keep]
        use = np.zeros(len(i), dtype=bool)
        use[rows] = True
        n_common = common.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p_i = np.where(common, self.k[ii] / self.n[ii], 0.0)
            p_j = np.where(common, self.k[jj] / self.n[jj], 0.0)
            var = np.where(common, p_i * (1 - p_i) / self.n[ii] + p_j * (1 - p_j) / self.n[jj],
                           0.0)  # fmt: skip
        mean_i, mean_j = p_i.sum(axis=1) / n_common, p_j.sum(axis=1) / n_common
        got: dict[str, FloatArray] = {"rows": rows.astype(np.float64), "mean_i": mean_i,
                                      "mean_j": mean_j, "diff": mean_i - mean_j}  # fmt: skip
        kinds: list[tuple[str, PairedInterval]] = []
        one = n_common == 1
        if one.any():
            s = common[one].argmax(axis=1)
            a, b = ii[one], jj[one]
            got["k1"], got["n1"] = self.k[a, s], self.n[a, s]
            got["k2"], got["n2"] = self.k[b, s], self.n[b, s]
            kinds.append(("score", unpaired_interval("score", levels, k1=got["k1"],
                          n1=got["n1"], k2=got["k2"], n2=got["n2"])))  # fmt: skip
        if (~one).any():
            se = np.sqrt(var[~one].sum(axis=1)) / n_common[~one]
            got["se"] = se
            kinds.append(("normal", unpaired_interval("normal", levels,
                          mean=got["diff"][~one], se=se)))  # fmt: skip
        got["one"] = one.astype(np.float64)
        return use, got, kinds


def _with_rates(
    frame: pl.DataFrame,
    use: npt.NDArray[np.bool_],
    got: dict[str, FloatArray],
    kinds: list[tuple[str, PairedInterval]],
    names: Sequence[str],
) -> pl.DataFrame:
    """``frame`` (after ``_with_ci``) with the rows ``use`` compared by rates: their means,
    interval columns at every level (``names`` in the order of the levels asked) and the
    one-sided p-values of the test, in place of the paired ones they could not have."""
    if not use.any():
        return frame
    rows = got["rows"].astype(np.int64)
    one = got["one"].astype(bool)
    cols = {c: frame[c].to_numpy().astype(np.float64, copy=True)
            for c in ("mean_candidate", "mean_parent", "mean_diff", *names, "_t_up",
                      "_t_down")}  # fmt: skip
    text = {c: np.asarray(frame[c].to_list(), dtype=object) for c in ("test", "ci_method")}
    cols["mean_candidate"][rows], cols["mean_parent"][rows] = got["mean_i"], got["mean_j"]
    cols["mean_diff"][rows] = got["diff"]
    for kind, interval in kinds:
        at = rows[one] if kind == "score" else rows[~one]
        for b, (lo, hi) in enumerate(interval.bounds):
            cols[names[2 * b]][at], cols[names[2 * b + 1]][at] = lo, hi
        cols["_t_up"][at], cols["_t_down"][at] = interval.p_greater, interval.p_less
        text["test"][at], text["ci_method"][at] = interval.test, interval.ci_method
    is_binary = frame["is_binary"].to_numpy().copy()
    is_binary[rows] = True
    p_mc = frame["p_mcnemar"].to_numpy().astype(np.float64, copy=True)
    p_mc[rows] = np.nan  # no pairs: no sign test
    return frame.with_columns(
        *(pl.Series(c, v, dtype=pl.Float64).fill_nan(None) for c, v in cols.items()),
        *(pl.Series(c, v.tolist(), dtype=pl.String) for c, v in text.items()),
        pl.Series("is_binary", is_binary, dtype=pl.Boolean),
        pl.Series("p_mcnemar", p_mc, dtype=pl.Float64).fill_nan(None),
    )


def _tost_of_rates(
    frame: pl.DataFrame, rule: Rule, use: npt.NDArray[np.bool_], got: dict[str, FloatArray]
) -> pl.DataFrame:
    """``p_tost`` of the rows compared by rates: the larger of the two one-sided tests of a
    difference within the rule's margin (the rates' own tests)."""
    if not use.any():
        return frame
    rows = got["rows"].astype(np.int64)
    one = got["one"].astype(bool)
    margin = frame.select(rule.margin_expr().alias("m"))["m"].to_numpy().astype(np.float64)
    margin = np.broadcast_to(margin, (len(frame),))[rows]  # a literal margin is one row
    p = np.full(len(rows), np.nan)
    m1 = margin[one]
    if one.any():
        args = (got["k1"], got["n1"], got["k2"], got["n2"])
        p[one] = np.maximum(score_diff_p(*args, -m1, "greater"), score_diff_p(*args, m1, "less"))
    if (~one).any():
        from scipy import special

        d, se, m = got["diff"][~one], got["se"], margin[~one]
        with np.errstate(invalid="ignore", divide="ignore"):
            p[~one] = np.maximum(special.ndtr(-(d + m) / se), special.ndtr((d - m) / se))
    p = np.where(np.isfinite(margin), p, np.nan)
    out = frame["p_tost"].to_numpy().astype(np.float64, copy=True)
    out[rows] = p
    return frame.with_columns(pl.Series("p_tost", out, dtype=pl.Float64).fill_nan(None))
