"""Paired comparison of two runs on the keys they share.

A paired comparison joins on the key ``"<task_id>#<seed>"``: the same task and start state
under two agents. Pairs where either side abstained (``None``) are dropped, never counted.
A metric's direction decides what a "win" is: for ``steps`` fewer is better.

The exact McNemar test is a binomial test on the discordant pairs (wins vs losses, ties
ignored): under "no difference" each discordant pair is a fair coin. 5 wins to 0 gives
``p = 1/32``; no discordant pairs gives ``p = 1``. The functions here work on numpy arrays so
that :mod:`hylo_analytics.paired` computes thousands of comparisons in one call.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._lazy import LazyModule

if TYPE_CHECKING:
    from scipy import stats
else:  # scipy is imported on first use: it costs half a second at startup
    stats = LazyModule("scipy.stats")

__all__ = [
    "BUILTIN_DIRECTIONS",
    "Alternative",
    "PairedComparison",
    "bootstrap_mean_ci",
    "higher_is_better",
    "mcnemar_exact",
    "mcnemar_p",
    "paired_compare",
]

Alternative = Literal["greater", "two-sided"]
Direction = Literal["maximize", "minimize"]


def _registry_directions() -> dict[str, Direction]:
    """Every registered metric name (ids and aliases) with its direction, from MetricSpec."""
    from hylo_analytics.metrics import default_registry

    reg = default_registry()
    return {
        name: ("maximize" if reg.get(name).higher_is_better else "minimize")
        for name in reg.alias_map()
        if reg.get(name).higher_is_better is not None
    }


# The built-in metrics' directions, read from the MetricSpec registry (one source of truth);
# a metric the registry does not know defaults to "maximize" unless the caller says otherwise.
BUILTIN_DIRECTIONS: Mapping[str, Direction] = _registry_directions()

FloatArray = npt.NDArray[np.float64]


def higher_is_better(metric: str | None = None, direction: Direction | None = None) -> bool:
    """Whether larger values of ``metric`` are better: ``direction`` wins, then the built-ins."""
    if direction is None:
        direction = BUILTIN_DIRECTIONS.get(metric or "", "maximize")
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    return direction == "maximize"


def mcnemar_p(
    candidate_wins: npt.ArrayLike,
    parent_wins: npt.ArrayLike,
    *,
    alternative: Alternative = "greater",
    mid_p: bool = False,
) -> FloatArray:
    """Exact McNemar p-values for arrays of win counts, vectorized.

    ``greater`` is P(X >= wins), X ~ Binomial(discordant, 1/2): the evidence that the
    candidate is better. ``two-sided`` doubles the smaller tail (capped at 1; the binomial is
    symmetric at 1/2). ``mid_p`` counts only half of P(X = wins), which is less conservative.
    Rows with no discordant pairs get p = 1: there is no evidence either way.
    """
    k = np.asarray(candidate_wins, dtype=np.int64)
    n = k + np.asarray(parent_wins, dtype=np.int64)
    half = 0.5 * stats.binom.pmf(k, n, 0.5) if mid_p else 0.0
    upper = stats.binom.sf(k, n, 0.5) + (half if mid_p else stats.binom.pmf(k, n, 0.5))
    if alternative == "greater":
        p = upper
    elif alternative == "two-sided":
        lower = stats.binom.cdf(k - 1, n, 0.5) + (half if mid_p else stats.binom.pmf(k, n, 0.5))
        p = 2.0 * np.minimum(upper, lower)
    else:
        raise ValueError(f"alternative must be 'greater' or 'two-sided', got {alternative!r}")
    p = np.where(n == 0, 1.0, np.minimum(p, 1.0))
    return np.asarray(p, dtype=np.float64)


def mcnemar_exact(
    candidate_wins: int,
    parent_wins: int,
    *,
    alternative: Alternative = "greater",
    mid_p: bool = False,
) -> float:
    """One exact McNemar p (see :func:`mcnemar_p`). 5 wins to 0 gives 1/32; 0:0 gives 1."""
    return float(
        mcnemar_p([candidate_wins], [parent_wins], alternative=alternative, mid_p=mid_p)[0]
    )


def bootstrap_mean_ci(
    diffs: npt.ArrayLike,
    groups: npt.ArrayLike | None = None,
    *,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    discrete_max: int = 32,
) -> tuple[FloatArray, FloatArray]:
    """Percentile paired-bootstrap CI of the mean difference, for many groups at once.

    ``diffs`` are per-pair differences sorted by ``groups`` (contiguous group ids 0..G-1; one
    group when omitted). Each bootstrap replicate resamples every group's pairs with
    replacement inside the group, so pairing is kept. When the differences take at most
    ``discrete_max`` distinct values (a binary metric has 3), a replicate's mean depends only
    on how often each value is drawn, which is Multinomial(n, observed frequencies): drawing
    those counts is the same bootstrap at a fraction of the cost. Work is chunked to bound
    memory. Groups with no pairs get NaN bounds (reported as missing, never as 0).
    """
    if n_boot < 1:
        raise ValueError(f"n_boot must be at least 1, got {n_boot}")
    d = np.asarray(diffs, dtype=np.float64)
    g = np.zeros(d.size, dtype=np.int64) if groups is None else np.asarray(groups, np.int64)
    if d.size and np.any(np.diff(g) < 0):
        raise ValueError("bootstrap_mean_ci: diffs must be sorted by group")
    n_groups = int(g.max()) + 1 if g.size else (1 if groups is None else 0)
    sizes = np.bincount(g, minlength=n_groups)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    values, inverse = np.unique(d, return_inverse=True)
    if values.size <= discrete_max:
        means = _multinomial_means(values, inverse, g, sizes, n_boot, rng)
    else:
        means = _resampled_means(d, g, sizes, n_boot, rng)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha], axis=0)
    empty = sizes == 0
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)


def _resampled_means(
    d: FloatArray,
    g: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    n_boot: int,
    rng: np.random.Generator,
) -> FloatArray:
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    ends = starts + sizes
    row_start, row_size = starts[g], sizes[g]
    means = np.empty((n_boot, sizes.size))
    chunk = max(1, min(n_boot, 4_000_000 // max(d.size, 1)))
    for b0 in range(0, n_boot, chunk):
        b1 = min(n_boot, b0 + chunk)
        idx = row_start + (rng.random((b1 - b0, d.size)) * row_size).astype(np.int64)
        # groups are contiguous, so a group's sum is a difference of running sums
        cs = np.zeros((b1 - b0, d.size + 1))
        np.cumsum(d[idx], axis=1, out=cs[:, 1:])
        means[b0:b1] = (cs[:, ends] - cs[:, starts]) / np.maximum(sizes, 1)
    return means


def _multinomial_means(
    values: FloatArray,
    inverse: npt.NDArray[np.intp],
    g: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.int64],
    n_boot: int,
    rng: np.random.Generator,
) -> FloatArray:
    k, n_groups = max(values.size, 1), sizes.size
    counts = np.bincount(g * k + inverse.ravel(), minlength=n_groups * k).reshape(n_groups, k)
    pvals = counts / np.maximum(sizes, 1)[:, None]
    pvals[sizes == 0, 0] = 1.0  # empty groups draw nothing; any valid distribution will do
    vals = values if values.size else np.zeros(1)
    means = np.empty((n_boot, n_groups))
    chunk = max(1, min(n_boot, 4_000_000 // max(n_groups, 1)))
    for b0 in range(0, n_boot, chunk):
        b1 = min(n_boot, b0 + chunk)
        # Multinomial counts as a chain of binomials, each one vectorized over every
        # (replicate, group): X_j ~ Bin(n - X_1 - ... - X_{j-1}, p_j / (1 - p_1 - ... - p_{j-1}))
        left = np.broadcast_to(sizes, (b1 - b0, n_groups)).astype(np.int64)
        p_left = np.ones(n_groups)
        total = np.zeros((b1 - b0, n_groups))
        for j in range(k - 1):
            with np.errstate(divide="ignore", invalid="ignore"):
                pj = np.clip(np.where(p_left > 0, pvals[:, j] / p_left, 0.0), 0.0, 1.0)
            x = rng.binomial(left, pj)
            total += x * vals[j]
            left -= x
            p_left = p_left - pvals[:, j]
        total += left * vals[k - 1]
        means[b0:b1] = total / np.maximum(sizes, 1)
    return means


@dataclass(frozen=True)
class PairedComparison:
    """Wins, losses and ties over the keys both runs scored, with the McNemar p-value.

    ``mean_diff`` is candidate minus parent in the metric's own units; ``ci_low``/``ci_high``
    bound it (paired bootstrap). ``wilcoxon_p`` tests the same hypothesis as ``p_value`` using
    the size of each difference, not only its sign.
    """

    n_pairs: int
    candidate_wins: int
    parent_wins: int
    ties: int
    p_value: float
    n_dropped: int = 0
    alternative: Alternative = "greater"
    mid_p: bool = False
    higher_is_better: bool = True
    mean_diff: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    confidence: float = 0.95
    wilcoxon_p: float = math.nan
    n_unmatched: int = 0

    @property
    def test_name(self) -> str:
        side = "one-sided" if self.alternative == "greater" else "two-sided"
        return f"exact McNemar{' mid-p' if self.mid_p else ''} ({side})"

    def as_dict(self) -> dict[str, object]:
        """The fields as a plain dict (for JSON and frames)."""
        return {f: getattr(self, f) for f in self.__dataclass_fields__}

    def __str__(self) -> str:
        better = "higher" if self.higher_is_better else "lower"
        lines = [
            f"PairedComparison ({better} is better): {self.n_pairs} pairs, "
            f"{self.n_dropped} dropped for abstention, {self.n_unmatched} unmatched keys",
            f"  candidate wins {self.candidate_wins} | parent wins {self.parent_wins} | "
            f"ties {self.ties}",
            f"  {self.test_name} p = {self.p_value:.4g}",
        ]
        if not math.isnan(self.mean_diff):
            lines.append(
                f"  mean difference (candidate - parent) = {self.mean_diff:.4g}, "
                f"{self.confidence:.0%} bootstrap CI [{self.ci_low:.4g}, {self.ci_high:.4g}], "
                f"Wilcoxon p = {self.wilcoxon_p:.4g}"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        heads = ["n_pairs", "candidate_wins", "parent_wins", "ties", f"p ({self.test_name})"]
        heads += ["dropped", "mean_diff", f"CI {self.confidence:.0%}", "Wilcoxon p"]
        vals: list[object] = [self.n_pairs, self.candidate_wins, self.parent_wins, self.ties]
        vals += [f"{self.p_value:.4g}", self.n_dropped, f"{self.mean_diff:.4g}"]
        vals += [f"[{self.ci_low:.4g}, {self.ci_high:.4g}]", f"{self.wilcoxon_p:.4g}"]
        th = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
        td = "".join(f"<td>{html.escape(str(v))}</td>" for v in vals)
        return f"<table><thead><tr>{th}</tr></thead><tbody><tr>{td}</tr></tbody></table>"


def paired_compare(
    candidate: Mapping[str, float | None] | pl.DataFrame,
    parent: Mapping[str, float | None] | pl.DataFrame,
    *,
    alternative: Alternative = "greater",
    mid_p: bool = False,
    direction: Direction | None = None,
    metric: str | None = None,
    n_boot: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> PairedComparison:
    """Compare two runs key by key; abstentions (``None``) drop the pair.

    ``candidate`` and ``parent`` map key -> value, or are frames with ``key`` and ``value``
    columns (one row per key). ``direction`` (or the built-in direction of ``metric``)
    decides what a win is; the default is higher-is-better.
    """
    hib = higher_is_better(metric, direction)
    c_vals, p_vals, n_unmatched = _align(candidate, parent)
    both = ~(np.isnan(c_vals) | np.isnan(p_vals))
    c, p = c_vals[both], p_vals[both]
    better = (c - p) if hib else (p - c)
    cw, pw = int((better > 0).sum()), int((better < 0).sum())
    pval = mcnemar_exact(cw, pw, alternative=alternative, mid_p=mid_p)
    diff = c - p
    if diff.size:
        lo, hi = bootstrap_mean_ci(diff, n_boot=n_boot, confidence=confidence, seed=seed)
        ci = (float(lo[0]), float(hi[0]))
    else:
        ci = (math.nan, math.nan)
    return PairedComparison(
        n_pairs=int(both.sum()),
        candidate_wins=cw,
        parent_wins=pw,
        ties=int(both.sum()) - cw - pw,
        p_value=pval,
        n_dropped=int((~both).sum()),
        alternative=alternative,
        mid_p=mid_p,
        higher_is_better=hib,
        mean_diff=float(diff.mean()) if diff.size else math.nan,
        ci_low=ci[0],
        ci_high=ci[1],
        confidence=confidence,
        wilcoxon_p=_wilcoxon(better, alternative),
        n_unmatched=n_unmatched,
    )


def _wilcoxon(better: FloatArray, alternative: Alternative) -> float:
    """Wilcoxon signed-rank p on improvement-oriented differences; 1 when all are ties."""
    if not np.any(better != 0):
        return math.nan if better.size == 0 else 1.0
    res = stats.wilcoxon(better, alternative=alternative, zero_method="wilcox")
    return float(res.pvalue)


def _align(
    candidate: Mapping[str, float | None] | pl.DataFrame,
    parent: Mapping[str, float | None] | pl.DataFrame,
) -> tuple[FloatArray, FloatArray, int]:
    """Values of the shared keys, NaN for an abstention, and how many keys were unmatched."""
    cf, pf = _as_frame(candidate, "candidate"), _as_frame(parent, "parent")
    joined = cf.join(pf, on="key", how="full", coalesce=True, suffix="_parent")
    shared = joined.filter(pl.col("present") & pl.col("present_parent"))
    vals = shared.select(pl.col("value", "value_parent").cast(pl.Float64).fill_null(np.nan))
    return (
        vals["value"].to_numpy().copy(),
        vals["value_parent"].to_numpy().copy(),
        joined.height - shared.height,
    )


def _as_frame(side: Mapping[str, float | None] | pl.DataFrame, name: str) -> pl.DataFrame:
    if isinstance(side, pl.DataFrame):
        missing = {"key", "value"} - set(side.columns)
        if missing:
            raise ValueError(f"{name} frame lacks column(s) {sorted(missing)}; expected key, value")
        frame = side.select("key", pl.col("value").cast(pl.Float64))
        dup = frame.filter(pl.col("key").is_duplicated())
        if dup.height:
            raise ValueError(
                f"{name} has {dup['key'].n_unique()} duplicated key(s) (e.g. {dup['key'][0]!r}); "
                "reduce epochs first (compare_runs(..., reducer='mean'))"
            )
    else:
        frame = pl.DataFrame(
            {"key": list(side.keys()), "value": list(side.values())},
            schema={"key": pl.String, "value": pl.Float64},
        )
    return frame.with_columns(
        pl.col("value").fill_nan(None), present=pl.lit(True, dtype=pl.Boolean)
    )
