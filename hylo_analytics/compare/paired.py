"""``paired_compare``: two runs, key by key (the hylo spec's entry point).

A paired comparison joins on the key ``"<task_id>#<seed>"``: the same task and start state
under two agents. Pairs where either side abstained (``None``) are dropped, never counted. A
metric's direction decides what a "win" is: for ``steps`` fewer is better. The one-sided exact
McNemar test gives ``p = 1/32`` for 5 wins to 0.

This is the two-run case of :func:`~hylo_analytics.compare.compare_scores`, run through the
same engine: ``paired_compare(c, p)`` equals the overall row of ``compare_scores`` on the same
pairs, field for field (a test holds them equal).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from hylo_analytics._html import text
from hylo_analytics.compare.engine import CiMethod, compare_scores
from hylo_analytics.errors import InputError
from hylo_analytics.metrics import Direction, default_registry
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.stats.significance import Alternative, mcnemar_p

__all__ = ["PairedComparison", "paired_compare"]

_CANDIDATE, _PARENT = "candidate", "parent"


@dataclass(frozen=True)
class PairedComparison:
    """Wins, losses and ties over the keys both runs scored, with the McNemar p-value.

    ``mean_diff`` is candidate minus parent in the metric's own units; ``ci_low``/``ci_high``
    bound it at ``level`` (``ci_method``: Tango's score interval for 0/1 values, the
    percentile bootstrap of the differences otherwise). ``p_value`` is the one-sided exact McNemar p that the candidate
    is better (the spec's; for a numeric metric the sign test), ``p_worse`` that it is worse.
    ``test`` / ``p_test`` are the test the interval inverts (Tango's score test for 0/1
    values, the bootstrap test of the mean otherwise), the one ``compare_scores``' verdicts
    use. ``wilcoxon_p`` tests the same hypothesis as ``p_value`` using the size of each
    difference, not only its sign.
    """

    n_pairs: int
    candidate_wins: int
    parent_wins: int
    ties: int
    p_value: float
    n_dropped: int = 0
    n_unmatched: int = 0
    alternative: Alternative = "greater"
    mid_p: bool = False
    higher_is_better: bool = True
    mean_candidate: float = math.nan
    mean_parent: float = math.nan
    mean_diff: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    level: float = DEFAULT_LEVEL
    wilcoxon_p: float = math.nan
    p_two_sided: float = math.nan
    p_worse: float = math.nan
    ci_method: str | None = None
    test: str | None = None
    p_test: float = math.nan
    n_dropped_candidate: int = 0
    n_dropped_parent: int = 0
    diff_if_drops_min: float = math.nan
    diff_if_drops_max: float = math.nan

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
                f"{self.level:.0%} CI ({self.ci_method}) [{self.ci_low:.4g}, {self.ci_high:.4g}], "
                f"Wilcoxon p = {self.wilcoxon_p:.4g}"
            )
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        heads = ["n_pairs", "candidate_wins", "parent_wins", "ties", f"p ({self.test_name})"]
        heads += ["dropped", "mean_diff", f"CI {self.level:.0%}", "Wilcoxon p"]
        vals: list[object] = [self.n_pairs, self.candidate_wins, self.parent_wins, self.ties]
        vals += [f"{self.p_value:.4g}", self.n_dropped, f"{self.mean_diff:.4g}"]
        vals += [f"[{self.ci_low:.4g}, {self.ci_high:.4g}]", f"{self.wilcoxon_p:.4g}"]
        th = "".join(f"<th>{text(h)}</th>" for h in heads)
        td = "".join(f"<td>{text(str(v))}</td>" for v in vals)
        return f"<table><thead><tr>{th}</tr></thead><tbody><tr>{td}</tr></tbody></table>"


def paired_compare(
    candidate: Mapping[str, float | None] | pl.DataFrame,
    parent: Mapping[str, float | None] | pl.DataFrame,
    *,
    alternative: Alternative = "greater",
    mid_p: bool = False,
    direction: Direction | None = None,
    metric: str | None = None,
    ci: CiMethod = "auto",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
) -> PairedComparison:
    """Compare two runs key by key; abstentions (``None``) drop the pair.

    ``candidate`` and ``parent`` map key -> value, or are frames with ``key`` and ``value``
    columns (one row per key). ``direction`` (or the registered direction of ``metric``)
    decides what a win is; the default is higher-is-better. The other options are
    :func:`~hylo_analytics.compare.compare_scores`' and mean the same there.
    """
    if direction is not None and direction not in ("maximize", "minimize"):
        raise InputError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    name = metric or "value"
    chosen = direction or default_registry().directions().get(name, "maximize")
    frame = pl.concat([_as_frame(candidate, _CANDIDATE), _as_frame(parent, _PARENT)])
    out = compare_scores(
        frame.with_columns(metric=pl.lit(name)),
        candidates=_CANDIDATE,
        parent=_PARENT,
        reducer=None,
        alternative=alternative,
        mid_p=mid_p,
        directions={name: chosen},
        ci=ci,
        n_resamples=n_resamples,
        level=level,
        seed=seed,
    )
    row = out.filter(pl.col("level") == "overall").row(0, named=True)
    # the spec's p-values are the exact McNemar's; the verdict's test (which the interval
    # inverts) is kept beside them as ``test`` / ``p_test``
    wins, losses = row["candidate_wins"], row["parent_wins"]
    exact = {
        "p_value": row["p_mcnemar"],
        "p_worse": row["p_mcnemar"]
        if alternative != "greater"
        else float(mcnemar_p(losses, wins, alternative="greater", mid_p=mid_p)),
        "p_two_sided": float(mcnemar_p(wins, losses, alternative="two-sided", mid_p=mid_p)),
        "p_test": row["p_value"],
        # the frame's ``level`` column is the grouping level ("overall"), not the CI's
        "level": level,
    }
    return PairedComparison(
        **{f: _plain(row[f]) for f in PairedComparison.__dataclass_fields__ if f not in exact},
        **exact,
    )


def _plain(value: Any) -> Any:
    return math.nan if value is None else value


def _as_frame(side: Mapping[str, float | None] | pl.DataFrame, run: str) -> pl.DataFrame:
    if isinstance(side, pl.DataFrame):
        missing = {"key", "value"} - set(side.columns)
        if missing:
            raise InputError(f"{run} frame lacks column(s) {sorted(missing)}; expected key, value")
        frame = side.select("key", pl.col("value").cast(pl.Float64))
        dup = frame.filter(pl.col("key").is_duplicated())
        if dup.height:
            raise InputError(
                f"{run} has {dup['key'].n_unique()} duplicated key(s) (e.g. {dup['key'][0]!r}); "
                "reduce epochs first (compare_scores(..., reducer='mean'))"
            )
    else:
        frame = pl.DataFrame(
            {"key": list(side.keys()), "value": list(side.values())},
            schema={"key": pl.String, "value": pl.Float64},
        )
    return frame.select(pl.lit(run).alias("run_id"), "key", pl.col("value").fill_nan(None))
