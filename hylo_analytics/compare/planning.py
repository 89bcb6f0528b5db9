"""Plan the next comparison from the last one: the pairs a pair of runs would need.

:func:`plan_from_runs` compares two runs of the store exactly as ``Store.compare`` does (same
pairs, same gate), reads the nuisance parameter of the power model off the pairs (the share
of discordant pairs for a binary metric, the sd of the differences otherwise) and answers two
questions with :mod:`hylo_analytics.stats.power`: what difference could these pairs detect,
and how many pairs would detect ``delta`` (or the observed difference)?
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics.compare.runs import compare_runs
from hylo_analytics.errors import SelectionError
from hylo_analytics.resolution import preferred_scores
from hylo_analytics.stats.power import Plan, plan_for, points, power_at, smallest_detectable
from hylo_analytics.stats.significance import Alternative
from hylo_analytics.store import ParquetStore

__all__ = ["RunPlan", "plan_from_runs"]


@dataclass(frozen=True)
class RunPlan:
    """What a pair of runs says about the size of the next comparison.

    ``observed_diff`` is oriented so that positive favours the candidate (a metric to
    minimize is negated). ``discordance`` (binary) or ``sd`` (continuous) is the value the
    plan assumed: the observed one unless ``assumed``. ``mde`` is the smallest difference the
    observed ``n_pairs`` detect with ``target_power``; ``plan`` gives the pairs for ``delta``
    (or for the observed difference) and ``power_at_n`` the power the observed pairs have
    for it. ``note`` says why a figure is missing.
    """

    candidate: str
    parent: str
    metric: str
    kind: Literal["binary", "continuous"]
    n_pairs: int
    candidate_wins: int
    parent_wins: int
    observed_diff: float
    discordance: float | None
    sd: float | None
    assumed: bool
    alpha: float
    target_power: float
    alternative: Alternative
    mde: float | None
    plan: Plan | None
    power_at_n: float | None
    note: str | None

    def __str__(self) -> str:
        binary = self.kind == "binary"

        def fmt(d: float) -> str:
            return f"{points(d)} points" if binary else f"{d:+.4g}"

        source = "assumed" if self.assumed else "observed"
        spread = (
            f"discordance {self.discordance:.3f} {source}"
            if binary
            else f"sd of differences {self.sd:.4g} {source}"
        )
        lines = [
            f"{self.candidate} vs {self.parent} on {self.metric}: {self.n_pairs:,} pairs, "
            f"{self.candidate_wins} candidate wins, {self.parent_wins} parent wins ({spread}); "
            f"observed difference {fmt(self.observed_diff)}"
        ]
        side = "one-sided" if self.alternative == "greater" else "two-sided"
        if self.mde is not None:
            lines.append(
                f"With these {self.n_pairs:,} pairs the smallest difference detectable with "
                f"power {self.target_power:.2f} at {side} alpha {self.alpha:g} is "
                f"{fmt(self.mde)}"
            )
        if self.plan is not None:
            lines.append(
                f"{self.plan} (the {self.n_pairs:,} pairs at hand give power {self.power_at_n:.3f})"
            )
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)


def plan_from_runs(
    store: ParquetStore,
    candidate: str,
    parent: str,
    *,
    metric: str = "success",
    delta: float | None = None,
    power: float = 0.8,
    alpha: float = 0.05,
    alternative: Alternative = "greater",
    discordance: float | None = None,
    sd: float | None = None,
    force: bool = False,
    errors: Errors | None = None,
) -> RunPlan:
    """Plan a comparison of ``candidate`` with ``parent`` from the pairs they already share.

    A metric whose paired values are all 0 or 1 uses the model of Tango's score test (the
    verdict's test) with the observed discordance (candidate_wins + parent_wins) / n_pairs; any other uses the paired
    t-test with the observed sd of the differences. ``discordance`` / ``sd`` override the
    observed value: an all-tie pair of runs shows no discordance, and a plan then needs an
    assumed one. ``delta`` (a difference of rates for binary metrics: 0.03 is 3 points)
    defaults to the observed difference. The pairs are ``Store.compare``'s under the errors
    policy ``errors`` (default: each run's harness convention), and so are the counts and the
    observed difference of a 0/1 metric.
    """
    row = _overall(
        compare_runs(
            store, [candidate], parent, metrics=[metric], force=force, ci="none", errors=errors
        )
    )
    n, wins, losses = int(row["n_pairs"]), int(row["candidate_wins"]), int(row["parent_wins"])
    if n == 0:
        raise SelectionError(
            f"{row['candidate']} and {row['parent']} share no key scored on {row['metric']!r} "
            "by both: there are no pairs to plan from; plan from two runs of the same tasks"
        )
    binary = bool(row["is_binary"])
    # a 0/1 metric: the comparison's own counts (wins and losses are oriented already)
    diffs = None if binary else _differences(store, row)["diff"]
    observed = (wins - losses) / n if diffs is None else float(diffs.mean())  # type: ignore[arg-type]
    spread = discordance if binary else sd
    assumed = spread is not None
    if spread is None:
        spread = (wins + losses) / n if diffs is None else _sd(diffs)
    target = delta if delta is not None else _observed_target(observed, alternative)
    mde, plan, at_n, note = _answers(binary, n, spread, target, power, alpha, alternative)
    if target is None:
        note = " ".join(
            filter(
                None,
                [
                    note,
                    "The candidate is not better on these pairs, so there is no observed "
                    "improvement to plan for; give delta (--delta) for the difference that "
                    "matters.",
                ],
            )
        )
    return RunPlan(
        candidate=str(row["candidate"]),
        parent=str(row["parent"]),
        metric=str(row["metric"]),
        kind="binary" if binary else "continuous",
        n_pairs=n,
        candidate_wins=wins,
        parent_wins=losses,
        observed_diff=observed,
        discordance=spread if binary else None,
        sd=None if binary else spread,
        assumed=assumed,
        alpha=alpha,
        target_power=power,
        alternative=alternative,
        mde=mde,
        plan=plan,
        power_at_n=at_n,
        note=note,
    )


def _overall(frame: pl.DataFrame) -> dict[str, Any]:
    rows = frame.filter(pl.col("level") == "overall")
    if rows.height != 1:
        raise SelectionError(
            f"the comparison gave {rows.height} overall rows, expected one; select one metric "
            "of two runs that share scored keys"
        )
    return rows.row(0, named=True)


def _differences(store: ParquetStore, row: dict[str, Any]) -> pl.DataFrame:
    """The compared pairs: per key, the oriented difference and whether both values are 0/1.

    Keys as ``Store.compare`` pairs them: the resolved per-key mean over epochs, abstentions
    on either side dropped.
    """
    cand, par, metric = str(row["candidate"]), str(row["parent"]), str(row["metric"])
    scores = preferred_scores(store, runs=[cand, par], metrics=[metric], level="key").filter(
        pl.col("metric") == metric
    )

    def side(run: str, name: str) -> pl.DataFrame:
        return scores.filter(pl.col("run_id") == run).select("key", pl.col("value").alias(name))

    sign = 1.0 if row["higher_is_better"] is not False else -1.0
    pairs = side(cand, "c").join(side(par, "p"), on="key").drop_nulls()
    zero_one = pl.col("c").is_in([0.0, 1.0]) & pl.col("p").is_in([0.0, 1.0])
    return pairs.select(diff=sign * (pl.col("c") - pl.col("p")), binary=zero_one)


def _sd(diff: pl.Series) -> float:
    value = diff.std(ddof=1) if diff.len() >= 2 else None
    return float(value) if isinstance(value, float) else 0.0


def _observed_target(observed: float, alternative: Alternative) -> float | None:
    """The observed difference, when a test of ``alternative`` could be planned for it."""
    if observed > 0 or (alternative == "two-sided" and observed != 0):
        return observed
    return None


def _answers(
    binary: bool,
    n: int,
    spread: float,
    target: float | None,
    power: float,
    alpha: float,
    alternative: Alternative,
) -> tuple[float | None, Plan | None, float | None, str | None]:
    """The minimum detectable effect at ``n``, the plan for ``target`` and its power at ``n``."""
    if spread == 0:
        if binary:
            what = "every pair is a tie, so the pairs cannot tell how often the runs disagree"
            flag = "discordance= (--discordance)"
        else:
            what = "every difference is equal, so the pairs cannot tell how much they vary"
            flag = "sd= (--sd)"
        name = "discordance" if binary else "sd of the differences"
        return None, None, None, f"Planning needs an assumed {name}: {what}; pass {flag}."
    kind: Literal["binary", "continuous"] = "binary" if binary else "continuous"
    options = {"power": power, "alpha": alpha, "alternative": alternative}
    note = None
    mde: float | None = None
    try:
        if binary or n >= 2:
            mde = smallest_detectable(n, spread, kind=kind, **options)  # type: ignore[arg-type]
    except ValueError as exc:
        note = f"No minimum detectable effect at {n} pairs: {exc}."
    if target is None:
        return mde, None, None, note
    plan = plan_for(target, spread, kind=kind, **options)  # type: ignore[arg-type]
    at_n = (
        power_at(n, target, spread, kind=kind, alpha=alpha, alternative=alternative)
        if binary or n >= 2
        else 0.0
    )
    return mde, plan, at_n, note
