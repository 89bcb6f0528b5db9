"""Critical differences of policies across tasks or suites: ranks, Friedman, cliques.

A *block* is a task (the default: ``benchmark_id, split, task_id``, a task of its suite, as
``summarize`` counts tasks) or a suite; each policy's value on a block is its mean of the
metric there (:func:`~hylo_analytics.aggregate.aggregate_scores` per policy and block: the
errors policy, the epoch reducer and the valid denominators are the aggregate's own). The
policies are ranked within each block in the metric's direction (the rule every comparison
uses, :func:`~hylo_analytics.metrics.resolve_directions`: lower is better for a latency) and
:func:`~hylo_analytics.stats.critical_difference.critical_difference_test` tests the average ranks
(Friedman, then Nemenyi or Wilcoxon-Holm) and finds the cliques the diagram draws as bars.

Friedman's test needs every policy on every block: a block where some policy has no value is
left out, counted in the ``blocks`` frame (``used``) and said in ``notes``, never silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics._html import text
from hylo_analytics.compare._prepare import declared_pairs, one_direction
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import Direction, resolve_directions
from hylo_analytics.stats.critical_difference import (
    CD_METHODS,
    CD_TESTS,
    CDTest,
    CriticalDifferenceStats,
    Friedman,
    critical_difference_test,
)

if TYPE_CHECKING:
    from hylo_analytics.metrics import MetricRegistry
    from hylo_analytics.stats.reducers import Reducer
    from hylo_analytics.store import ParquetStore

__all__ = ["BLOCKS", "CriticalDifference", "critical_difference_scores"]

#: The names ``blocks=`` understands besides columns: a task of its suite, or a suite.
BLOCKS: dict[str, tuple[str, ...]] = {
    "task_id": ("benchmark_id", "split", "task_id"),
    "task": ("benchmark_id", "split", "task_id"),
    "suite": ("benchmark_id", "split"),
}
_SHOWN = 50  # rows of each table in the notebook view


@dataclass(frozen=True)
class CriticalDifference:
    """What :func:`critical_difference_scores` found, as frames.

    - ``ranks``: one row per policy, best first: ``rank`` (its place), ``policy``,
      ``avg_rank`` (1 = best on every block), ``mean`` (its mean over the blocks used),
      ``n_blocks`` (used), ``n_missing`` (blocks where it has no value: why blocks were left
      out) and ``cliques`` (the ids of the cliques holding it);
    - ``pairs``: one row per pair, ``policy`` ranked above ``opponent``: ``rank_diff``
      (>= 0), ``mean_diff`` (policy minus opponent, in the metric's units), ``statistic``,
      ``p``, ``p_holm`` (Wilcoxon; null under Nemenyi, whose p is adjusted for every pair
      already), ``significant`` and ``method``;
    - ``cliques``: one row per clique (``clique``, ``size``, ``first`` / ``last`` policy and
      their average ranks, ``policies``): maximal runs of consecutive policies no pair of
      which differs significantly, the bars of the diagram;
    - ``blocks``: one row per block, ``used`` or not and the policies it lacks.

    ``friedman`` (chi-square and Iman-Davenport F), ``cd`` (Nemenyi's critical difference, at
    ``alpha``), ``test``, ``direction`` (``maximize`` / ``minimize``) and ``notes`` (what was
    left out or assumed, in words).
    """

    ranks: pl.DataFrame
    pairs: pl.DataFrame
    cliques: pl.DataFrame
    blocks: pl.DataFrame
    metric: str
    direction: str
    test: str
    alpha: float
    cd: float
    friedman: Friedman
    block_columns: tuple[str, ...]
    notes: tuple[str, ...] = ()
    draw: Callable[..., Any] | None = field(default=None, repr=False, compare=False)

    @property
    def tests(self) -> pl.DataFrame:
        """The omnibus tests and the critical difference, one row each."""
        f = self.friedman
        return pl.DataFrame(
            {
                "test": ["friedman chi-square", "iman-davenport F", "nemenyi CD"],
                "statistic": [f.statistic, f.f_statistic, self.cd],
                "df1": [f.df, f.f_df[0], None],
                "df2": [None, f.f_df[1], None],
                "p": [f.p, f.f_p, None],
                "alpha": [self.alpha] * 3,
                "n_blocks": [f.n_blocks] * 3,
                "n_policies": [f.k] * 3,
            },
            schema_overrides={"df1": pl.Int64, "df2": pl.Int64, "p": pl.Float64},
        )

    def chart(self, *, top: int | None = None, title: str | None = None) -> Any:
        """The critical-difference diagram (:func:`hylo_analytics.charts.critical_difference_diagram`;
        ``top``: the policies drawn, half from each end, default 30); a result of
        ``Store.critical_difference`` carries it (the compare stage imports no chart)."""
        if self.draw is None:
            raise InputError(
                "CriticalDifference.chart: this result was made without its chart; draw it "
                "with hylo_analytics.charts.critical_difference_diagram(cd) "
                "(Store.critical_difference's results draw themselves)"
            )
        options: dict[str, Any] = {} if top is None else {"top": top}
        if title is not None:
            options["title"] = title
        return self.draw(self, **options)

    def __repr__(self) -> str:
        with pl.Config(tbl_rows=20, float_precision=3):
            return (
                f"CriticalDifference(metric={self.metric!r}, test={self.test!r}, "
                f"policies={self.ranks.height}, blocks={self.friedman.n_blocks}, "
                f"cd={self.cd:.3f}, friedman_p={self.friedman.p:.3g})\n{self.ranks}"
            )

    def _repr_html_(self) -> str:
        from hylo_analytics.compare.ranking import _table

        f = self.friedman
        how = (
            f"Nemenyi: two policies differ when their average ranks are more than CD = "
            f"{self.cd:.3f} apart"
            if self.test == "nemenyi"
            else f"Wilcoxon signed-rank of every pair, Holm over all {self.pairs.height:,} "
            f"(Nemenyi's CD would be {self.cd:.3f})"
        )
        intro = (
            f"<strong>Critical differences on <code>{text(self.metric)}</code></strong> "
            f"({text(self.direction)}) &mdash; {f.k:,} policies over {f.n_blocks:,} blocks "
            f"({text(', '.join(self.block_columns))}). Friedman chi-square {f.statistic:.3f} "
            f"(df {f.df}, p = {f.p:.3g}); Iman-Davenport F {f.f_statistic:.3f} (p = "
            f"{f.f_p:.3g}). {text(how)}, at alpha = {self.alpha:g}."
        )
        ranks = self.ranks.head(_SHOWN).select(
            "rank",
            "policy",
            avg_rank=pl.col("avg_rank").round(3),
            mean=pl.col("mean").round_sig_figs(4),
            cliques=pl.col("cliques").cast(pl.List(pl.String)).list.join(", "),
            missing="n_missing",
        )
        cliques = self.cliques.filter(pl.col("size") > 1).head(_SHOWN).select(
            "clique", "size", span=pl.format("{} .. {}", "first", "last"),
            ranks=pl.format("{} .. {}", pl.col("first_rank").round(2),
                            pl.col("last_rank").round(2)),
        )  # fmt: skip
        more = (
            f"<p>First {_SHOWN} of {self.ranks.height:,} policies shown.</p>"
            if self.ranks.height > _SHOWN
            else ""
        )
        notes = "".join(f"<p>{text(note)}</p>" for note in self.notes)
        heads = ["rank", "policy", "average rank", "mean", "cliques", "blocks missing"]
        return (
            f"<div><p>{intro}</p>{_table(heads, ranks)}{more}"
            f"{_table(['clique', 'size', 'policies', 'average ranks'], cliques)}{notes}</div>"
        )


def critical_difference_scores(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    *,
    policy: str = "agent_name",
    blocks: str | Sequence[str] = "task_id",
    metric: str = "success",
    test: CDTest = "nemenyi",
    alpha: float = 0.05,
    runs: Sequence[str] | str | None = None,
    policies: Sequence[str] | None = None,
    directions: Mapping[str, Direction] | None = None,
    errors: Errors | None = None,
    reducer: str | Reducer | None = "mean",
    source: str | Sequence[str] | None = None,
    registry: MetricRegistry | None = None,
) -> CriticalDifference:
    """Average ranks of the policies across blocks, Friedman's test, the post-hoc test of
    every pair and the cliques.

    Parameters
    ----------
    scores : a store (its resolved scores) or a scores frame (``metric``, ``value``, the
        ``policy`` and block columns; ``key`` to reduce epochs).
    policy : the column naming a policy (default ``agent_name``: an agent's runs together;
        ``run_id``: each run).
    blocks : ``task_id`` (default: a task of its suite, ``benchmark_id, split, task_id``),
        ``suite`` (``benchmark_id, split``), or the column(s) naming a block.
    test : ``nemenyi`` (average ranks more than the critical difference apart) or
        ``wilcoxon`` (each pair's signed-rank test on its block means, Holm over all pairs:
        Benavoli et al. 2016).
    runs : the runs to keep: from a store ids, unique prefixes or selectors, a selector naming
        every run it matches (``agent=pi05``); from a frame, run ids.
    policies : the policies to compare (default: every one with a value).
    directions : metric -> ``maximize`` / ``minimize``, over what the scores declare and the
        registry say; a metric of unknown direction is ranked higher-is-better (a note says so).
    errors, reducer, source, registry : as :func:`~hylo_analytics.aggregate.aggregate_scores`.
    """
    from hylo_analytics.aggregate import aggregate_scores
    from hylo_analytics.store import ParquetStore, unwrap_store

    if test not in CD_TESTS:
        raise InputError(f"critical_difference: test must be one of {CD_TESTS}, got {test!r}")
    scores = unwrap_store(scores)
    if isinstance(scores, ParquetStore) and runs is not None:
        runs = scores.select_runs(runs)  # ids, prefixes or selectors naming every run they match
    names = None if isinstance(scores, ParquetStore) else scores.collect_schema().names()
    block_cols = _block_columns(blocks, names)
    if policy in block_cols:
        raise InputError(f"critical_difference: {policy!r} is both the policy and a block")
    cells = aggregate_scores(
        scores, [policy, *block_cols], metrics=[metric], statistics=["mean"], runs=runs,
        errors=errors, reducer=reducer, source=source, registry=registry,
    )  # fmt: skip
    if cells.is_empty():
        raise SelectionError(
            f"critical_difference: no scores of {metric!r} in the runs selected; check the "
            "metric and runs (see 'hylo-analytics runs')"
        )
    declared = _declared(scores, runs, source, metric)
    found = resolve_directions([metric], explicit=directions, declared=declared,
                               registry=registry)  # fmt: skip
    direction = found[metric][0] if metric in found else None
    return _critical_difference(cells, policy, block_cols, metric, direction, test, alpha, policies)


def _block_columns(blocks: str | Sequence[str], names: list[str] | None) -> tuple[str, ...]:
    """The block columns: a name of :data:`BLOCKS` (its columns a frame lacks dropped) or
    the columns given."""
    if isinstance(blocks, str) and blocks in BLOCKS:
        cols = BLOCKS[blocks]
        if names is not None:
            cols = tuple(c for c in cols if c in names)
    else:
        cols = (blocks,) if isinstance(blocks, str) else tuple(blocks)
    if not cols:
        raise InputError(
            f"critical_difference: the scores have no column of blocks={blocks!r} "
            f"({', '.join(BLOCKS.get(str(blocks), ()))}); pass blocks= naming the column(s) "
            "that identify a block (a task, a suite)"
        )
    return tuple(dict.fromkeys(cols))


def _declared(
    scores: pl.DataFrame | pl.LazyFrame | ParquetStore,
    runs: Sequence[str] | None,
    source: str | Sequence[str] | None,
    metric: str,
) -> dict[str, str]:
    """The direction the scores' metadata declare for ``metric`` (as rank reads it)."""
    from hylo_analytics.store import ParquetStore

    if isinstance(scores, ParquetStore):
        from hylo_analytics.compare.runs import _Reader

        one = source if isinstance(source, str) or source is None else None
        reader = _Reader(scores, list(runs or []), one, None, {}, ())
        if runs is None:
            reader.filter = None  # every run
        return one_direction(reader.declared([metric]))
    frame = scores.lazy().collect() if isinstance(scores, pl.LazyFrame) else scores
    if "metadata" not in frame.columns:
        return {}
    return one_direction(declared_pairs(frame.filter(pl.col("metric") == metric)))


def _critical_difference(
    cells: pl.DataFrame,
    policy: str,
    block_cols: tuple[str, ...],
    metric: str,
    direction: str | None,
    test: CDTest,
    alpha: float,
    policies: Sequence[str] | None,
) -> CriticalDifference:
    """The matrix of the cells' means (blocks x policies), the statistics, the frames."""
    notes: list[str] = []
    errored = cells.filter(pl.col("n_valid") == 0, pl.col("n_errors").fill_null(0) > 0).height
    cells = cells.filter(pl.col("n_valid") > 0, pl.col("mean").is_not_null())
    unnamed = cells.filter(pl.col(policy).is_null()).height
    cells = cells.filter(pl.col(policy).is_not_null())
    blockless = cells.filter(pl.any_horizontal(pl.col(block_cols).is_null())).height
    cells = cells.filter(pl.all_horizontal(pl.col(block_cols).is_not_null()))
    if unnamed or blockless:
        why = [f"{unnamed:,} name no {policy}"] if unnamed else []
        why += [f"{blockless:,} name no {'/'.join(block_cols)}"] if blockless else []
        notes.append(f"{unnamed + blockless:,} (policy, block) cell(s) left out: {', '.join(why)}")
    cells = cells.with_columns(_pol=pl.col(policy).cast(pl.String))
    held = sorted(set(cells["_pol"].to_list()))
    names = _chosen(policies, held, metric)
    cells = cells.filter(pl.col("_pol").is_in(names))
    block_frame = cells.select(block_cols).unique().sort(block_cols, nulls_last=True)
    block_frame = block_frame.with_row_index("_b")
    cells = cells.join(block_frame, on=list(block_cols), how="left", nulls_equal=True)
    k, n_all = len(names), block_frame.height
    matrix = np.full((n_all, k), np.nan)
    codes = cells["_pol"].cast(pl.Enum(names)).to_physical().to_numpy().astype(np.int64)
    matrix[cells["_b"].to_numpy().astype(np.int64), codes] = cells["mean"].to_numpy()
    complete = ~np.isnan(matrix).any(axis=1)
    missing = np.isnan(matrix).sum(axis=0)
    if direction is None:
        notes.append(
            f"{metric!r} has no known direction: ranked as higher-is-better (pass "
            "directions={...: 'minimize'} / --direction minimize if lower is better)"
        )
    maximize = direction != "minimize"
    hint = (
        f"{errored:,} (policy, block) cell(s) have only errored episodes, left out under "
        "errors='exclude': errors='failure' (--errors failure) counts them as failures and "
        "keeps their blocks"
        if errored
        else ""
    )
    if complete.sum() < 2:
        raise SelectionError(
            _too_few(names, missing, int(complete.sum()), n_all) + (f"; {hint}" if hint else "")
        )
    if not complete.all():
        notes.append(_dropped_note(names, missing, int((~complete).sum()), n_all))
        notes += [hint] if hint else []
    found = critical_difference_test(matrix[complete], maximize=maximize, test=test, alpha=alpha)
    if found.friedman.p >= alpha:
        notes.append(
            f"Friedman's test does not reject equal average ranks (p = {found.friedman.p:.3g}"
            f" >= alpha = {alpha:g}): Demšar's procedure stops here; the pairs are shown, "
            "but no difference among the policies is established"
        )
    n_pairs, n_blocks = k * (k - 1) // 2, found.friedman.n_blocks
    if test == "wilcoxon" and n_blocks <= 50 and n_pairs * 2.0 ** (1 - n_blocks) >= alpha:
        notes.append(
            f"with {n_blocks} blocks no Wilcoxon p is below 2 / 2^{n_blocks} = "
            f"{2.0 ** (1 - n_blocks):.3g}, and Holm multiplies the smallest by the "
            f"{n_pairs:,} pairs: no pair can be significant at alpha = {alpha:g}; use more "
            "blocks (tasks rather than suites) or test='nemenyi'"
        )
    if found.friedman.n_blocks < 10:
        notes.append(
            f"only {found.friedman.n_blocks} blocks: the chi-square approximation of "
            "Friedman's test is rough below 10 (Demšar 2006); read the Iman-Davenport F"
        )
    ranked = _ranks_frame(found, names, matrix[complete], missing)
    blocks_out = _blocks_frame(block_frame.drop("_b"), matrix, complete, names)
    return CriticalDifference(
        ranks=ranked,
        pairs=_pairs_frame(found, names, matrix[complete]),
        cliques=_cliques_frame(found, names),
        blocks=blocks_out,
        metric=metric,
        direction=direction or "maximize (assumed)",
        test=test,
        alpha=alpha,
        cd=found.cd,
        friedman=found.friedman,
        block_columns=block_cols,
        notes=tuple(notes),
    )


def _chosen(policies: Sequence[str] | None, held: list[str], metric: str) -> list[str]:
    names = list(dict.fromkeys(policies)) if policies is not None else held
    unknown = [p for p in names if p not in set(held)]
    if unknown:
        shown = held if len(held) <= 20 else [*held[:20], f"... ({len(held):,} in all)"]
        raise SelectionError(
            f"critical_difference: no scores of {metric!r} for policies {unknown}; have {shown}"
        )
    if len(names) < 2:
        raise SelectionError(
            f"critical_difference: needs at least two policies, got {names}; select runs of "
            "two or more (or another policy= field)"
        )
    return names


def _worst(names: list[str], missing: np.ndarray[Any, Any], n_all: int) -> str:
    top = np.argsort(-missing, kind="stable")[:3]
    return ", ".join(f"{names[i]} (no value on {int(missing[i]):,} of {n_all:,})"
                     for i in top if missing[i] > 0)  # fmt: skip


def _too_few(names: list[str], missing: np.ndarray[Any, Any], complete: int, n_all: int) -> str:
    return (
        f"critical_difference: only {complete} of {n_all:,} blocks have a value of every one "
        f"of the {len(names):,} policies, and Friedman's test needs at least 2 complete "
        f"blocks; the policies missing most: {_worst(names, missing, n_all)}. Compare the "
        "policies that share blocks (policies=) or select their runs"
    )


def _dropped_note(names: list[str], missing: np.ndarray[Any, Any], dropped: int, n_all: int) -> str:
    return (
        f"{dropped:,} of {n_all:,} blocks left out: some policy has no value there (Friedman "
        f"needs every policy on every block; the blocks frame lists them); missing most: "
        f"{_worst(names, missing, n_all)}"
    )


def _ranks_frame(
    found: CriticalDifferenceStats,
    names: list[str],
    values: np.ndarray[Any, Any],
    missing: np.ndarray[Any, Any],
) -> pl.DataFrame:
    order = found.order
    k = len(names)
    member_first = np.repeat(np.arange(len(found.clique_first)) + 1,
                             found.clique_last - found.clique_first + 1)  # fmt: skip
    positions = np.concatenate(
        [np.arange(a, b + 1) for a, b in zip(found.clique_first, found.clique_last, strict=True)]
    )
    member = (
        pl.DataFrame({"_pos": positions, "clique": member_first})
        .group_by("_pos")
        .agg(pl.col("clique").sort())
    )
    frame = pl.DataFrame(
        {
            "_pos": np.arange(k),
            "rank": np.arange(1, k + 1),
            "policy": [names[c] for c in order.tolist()],
            "avg_rank": found.avg_rank[order],
            "mean": values.mean(axis=0)[order],
            "n_blocks": np.full(k, values.shape[0]),
            "n_missing": missing[order].astype(np.int64),
        },
        schema_overrides={"rank": pl.Int64, "n_blocks": pl.Int64, "_pos": pl.Int64},
    )
    return (
        frame.join(member.with_columns(pl.col("_pos").cast(pl.Int64)), on="_pos", how="left")
        .rename({"clique": "cliques"})
        .sort("_pos")
        .drop("_pos")
    )


def _pairs_frame(
    found: CriticalDifferenceStats, names: list[str], values: np.ndarray[Any, Any]
) -> pl.DataFrame:
    ordered = [names[c] for c in found.order.tolist()]
    # two million pairs name their policies by code (an Enum in rank order), not as text
    named = pl.Series(ordered, dtype=pl.Enum(ordered))
    means = values.mean(axis=0)[found.order]
    return pl.DataFrame(
        {
            "policy": named.gather(found.i),
            "opponent": named.gather(found.j),
            "rank_diff": found.rank_diff,
            "mean_diff": means[found.i] - means[found.j],
            "statistic": found.statistic,
            "p": found.p,
            "p_holm": pl.Series(found.p_holm).fill_nan(None),
            "significant": found.significant,
            "n": found.n,
            "method": pl.Series(CD_METHODS, dtype=pl.Enum(CD_METHODS)).gather(found.method),
        }
    ).with_columns(test=pl.lit(found.test))


def _cliques_frame(found: CriticalDifferenceStats, names: list[str]) -> pl.DataFrame:
    ordered = [names[c] for c in found.order.tolist()]
    avg = found.avg_rank[found.order]
    first, last = found.clique_first, found.clique_last
    return pl.DataFrame(
        {
            "clique": np.arange(1, len(first) + 1),
            "size": last - first + 1,
            "first": [ordered[a] for a in first.tolist()],
            "last": [ordered[b] for b in last.tolist()],
            "first_rank": avg[first],
            "last_rank": avg[last],
            "policies": [ordered[a : b + 1] for a, b in zip(first.tolist(), last.tolist(),
                                                           strict=True)],
        },
        schema_overrides={"clique": pl.Int64, "size": pl.Int64,
                          "policies": pl.List(pl.String)},
    )  # fmt: skip


def _blocks_frame(
    blocks: pl.DataFrame, matrix: np.ndarray[Any, Any], complete: np.ndarray[Any, Any],
    names: list[str],
) -> pl.DataFrame:  # fmt: skip
    absent = np.isnan(matrix)
    b, p = np.nonzero(absent)
    lacking = (
        pl.DataFrame({"_b": b.astype(np.int64), "lacks": [names[i] for i in p.tolist()]},
                     schema={"_b": pl.Int64, "lacks": pl.String})
        .group_by("_b")
        .agg(pl.col("lacks"))
    )  # fmt: skip
    return (
        blocks.with_columns(
            _b=pl.int_range(pl.len(), dtype=pl.Int64),
            used=pl.Series(complete),
            n_policies=pl.Series((~absent).sum(axis=1).astype(np.int64)),
        )
        .join(lacking, on="_b", how="left")
        .with_columns(pl.col("lacks").fill_null(pl.lit([], pl.List(pl.String))))
        .sort("_b")
        .drop("_b")
    )
