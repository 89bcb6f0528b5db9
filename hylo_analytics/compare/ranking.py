"""A ranking of N policies with its uncertainty: the pairwise matrix, rank sets, strengths.

:func:`rank_policies` takes a long scores frame in which a ``policy`` column names each row's
policy (a run, or the runs of one agent) and ``strata`` columns name its suite; keys pair
within a suite. :func:`rank_runs` (``Store.rank``) reads the same values from the store in
one query. Both lay the values out as a (keys x policies) matrix
(:class:`~hylo_analytics.compare.pairwise.PolicyValues`) and answer three questions:

- **the matrix**: every pair of policies, all N(N-1)/2 of them counted at once by products
  over keys (:mod:`hylo_analytics.compare.pairwise`), each with the paired engine's test,
  interval and verdict, Holm-adjusted over the whole matrix as one family: a pair is
  *separated* when its verdict is ``improved`` or ``regressed``;
- **rank sets and tie groups**: a policy's best possible rank is 1 + the number of policies
  separated above it, its worst N - the number separated below it; going down the ranking,
  a *tie group* grows while its next policy is separated from none of the group (a new group
  starts at the first that is), so no test separates two policies of one group;
- **strengths**: a Bradley-Terry log-strength per policy fitted on the keys' games (for each
  key and pair of policies, the better value wins one game; ties are no game), penalized
  (:mod:`hylo_analytics.stats.bradley_terry`), centred to sum 0, with intervals from the
  sandwich over keys within suites (default: the variance a stratified bootstrap of keys
  estimates, in closed form, affordable at N = 2,000) or, for a few policies, the bootstrap
  itself (every resample refitted).

A policy that shares no key with any other (a published "k of n": counted rows) plays no game:
it has no strength, is ordered by mean after the policies the keys place, and its pairs with
other such policies are compared by their rates (:class:`~hylo_analytics.compare.pairwise.
Rates`), so a leaderboard of published counts still gets rank sets.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics import _progress
from hylo_analytics._harness import Errors, check_errors
from hylo_analytics._html import text
from hylo_analytics.compare._clusters import ranking_note, ranking_spec, strength_meat
from hylo_analytics.compare._prepare import Reducer, declared_pairs, one_direction, prepare_scores
from hylo_analytics.compare._rank_store import names_ranked, store_values
from hylo_analytics.compare.pairwise import (
    PAIR_CHUNK,
    PolicyValues,
    alone_policies,
    pair_counts,
    pair_statistics,
)
from hylo_analytics.compare.verdicts import Rule, StatisticalRule
from hylo_analytics.errors import InputError
from hylo_analytics.metrics import Direction, resolve_directions
from hylo_analytics.stats.bradley_terry import (
    DEFAULT_PENALTY,
    bradley_terry,
    sandwich_covariance,
)
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level, z_value
from hylo_analytics.stats.interval import IntervalSpec
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["STRENGTH_CIS", "Ranking", "StrengthCI", "rank_policies", "rank_runs"]

StrengthCI = Literal["sandwich", "bootstrap"]
STRENGTH_CIS: tuple[str, ...] = ("sandwich", "bootstrap")
_SEP = "\x1f"
_KEEP = ("epoch", "skip_reason", "errored", "_policy", "errors_policy", "source_format",
         "metadata", "source")  # fmt: skip
_CHUNK = 1_000  # bootstrap resamples fitted at once (memory: CHUNK x discordant keys)
_BOOTSTRAP_MAX = 100  # policies the refitting bootstrap takes (its games are keys x N^2)
_RUN_COLUMNS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")
_REDUCERS = {"mean": "avg", "max": "max", "min": "min"}


@dataclass(frozen=True)
class Ranking:
    """What :func:`rank_policies` found, as three polars frames.

    - ``matrix``: one row per pair (``policy`` vs ``opponent``, ``policy`` first in the
      ranking's order) with the engine's columns (wins, mean difference and interval, p and
      Holm-adjusted p over the whole matrix, ``verdict`` of ``policy`` against ``opponent``);
    - ``ranks``: per policy, best first: ``rank`` (by strength), ``rank_best`` /
      ``rank_worst`` (the rank set), ``tie_group`` (1 for the top group), how many policies
      are separated above (``n_above``) and below (``n_below``), the mean and the strength;
    - ``strengths``: per policy, the log-strength with its interval (``strength_method``
      names it), its games won and lost, and ``mean`` (the average over suites of its
      per-suite mean).

    ``notes``: what the ranking left out, in words; ``left_out``: the selected runs it could
    not hold (``run_id``, ``reason``).
    """

    matrix: pl.DataFrame
    ranks: pl.DataFrame
    strengths: pl.DataFrame
    metric: str
    policies: tuple[str, ...]
    penalty: float
    level: float
    n_resamples: int
    strength_ci: str = "sandwich"
    notes: tuple[str, ...] = ()
    left_out: pl.DataFrame = field(
        default_factory=lambda: pl.DataFrame(schema={"run_id": pl.String, "reason": pl.String})
    )

    def top(self, k: int) -> pl.DataFrame:
        """The policies that may be among the best ``k`` (``rank_best <= k``), best first,
        with ``surely_top`` where no ordering the tests allow puts them below ``k``."""
        if k < 1:
            raise InputError(f"top: k must be >= 1, got {k}")
        return self.ranks.filter(pl.col("rank_best") <= k).with_columns(
            surely_top=pl.col("rank_worst") <= k
        )

    def submatrix(self, policies: Sequence[str]) -> pl.DataFrame:
        """The matrix's pairs between ``policies`` only (a heatmap of the top 50:
        ``ranking.submatrix(ranking.ranks["policy"].head(50))``)."""
        keep = pl.Series(list(policies), dtype=pl.String)
        return self.matrix.filter(
            pl.col("policy").cast(pl.String).is_in(keep),
            pl.col("opponent").cast(pl.String).is_in(keep),
        )

    def __repr__(self) -> str:
        with pl.Config(tbl_rows=50, tbl_cols=12, float_precision=4):
            return f"Ranking(metric={self.metric!r}, policies={len(self.policies)})\n{self.ranks}"

    def _repr_html_(self) -> str:
        shown = 50
        ranks = self.ranks.head(shown).select(
            "rank",
            "policy",
            rank_set="rank_set",
            tie_group="tie_group",
            mean=pl.format("{}%", (pl.col("mean") * 100).round(2)),
            strength=pl.format(
                "{} [{}, {}]",
                *(pl.col(c).round(3) for c in ("strength", "strength_low", "strength_high")),
            ),
        )
        pts = [(pl.col(c) * 100).round(2) for c in ("mean_diff", "ci_adj_low", "ci_adj_high")]
        pairs = self.matrix.head(shown).select(
            pair=pl.format("{} vs {}", "policy", "opponent"),
            record=pl.format("{} : {}", "wins", "losses"),
            difference=pl.format("{} pts [{}, {}]", *pts),
            holm_p=pl.format(
                "{} / {}", *(pl.col(c).round_sig_figs(3) for c in ("p_holm", "p_worse_holm"))
            ),
            verdict="verdict",
        )
        n = len(self.policies)
        how = (
            f"{self.level:.0%} sandwich intervals over keys within suites"
            if self.strength_ci == "sandwich"
            else f"{self.level:.0%} bootstrap intervals over keys within suites "
            f"({self.n_resamples:,} resamples)"
        )
        intro = (
            f"<strong>Ranking on <code>{text(self.metric)}</code></strong> &mdash; "
            f"{n:,} policies. Rank sets from the {self.matrix.height:,} paired comparisons "
            "(Holm over all of them: a policy's best rank is 1 + the policies separated above "
            "it, its worst N - those below; a tie group holds policies no test separates); "
            f"Bradley-Terry log-strengths (sum 0, L2 penalty {self.penalty:g}) with {how}."
        )
        more = f"<p>First {shown} of {n:,} policies shown.</p>" if n > shown else ""
        more += "".join(f"<p>{text(note)}</p>" for note in self.notes)
        heads = ["rank", "policy", "rank set", "tie group", "mean over suites",
                 "log-strength [interval]"]  # fmt: skip
        pair_heads = ["pair", "wins : losses", "difference [verdict's interval]",
                      "Holm p (better / worse)", "verdict of the first"]  # fmt: skip
        pairs_more = (
            f"<p>First {shown} of {self.matrix.height:,} pairs shown.</p>"
            if self.matrix.height > shown
            else ""
        )
        return (
            f"<div>{intro}{_table(heads, ranks)}{more}{_table(pair_heads, pairs)}{pairs_more}</div>"
        )


def _table(heads: list[str], frame: pl.DataFrame) -> str:
    """A small HTML table of ``frame``'s (few, display-only) rows, every cell escaped."""
    head = "".join(f"<th>{text(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{text(v)}</td>" for v in row) + "</tr>" for row in frame.iter_rows()
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def rank_policies(
    scores: pl.DataFrame,
    *,
    policy: str = "run_id",
    strata: Sequence[str] = (),
    metric: str = "success",
    policies: Sequence[str] | None = None,
    directions: Mapping[str, Direction] | None = None,
    rule: Rule | None = None,
    errors: Errors | None = None,
    reducer: Reducer | None = "mean",
    penalty: float = DEFAULT_PENALTY,
    strength_ci: StrengthCI = "sandwich",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
    progress: bool | None = None,
    cluster: str | None = None,
) -> Ranking:
    """Rank the policies of ``scores`` on ``metric``, with the uncertainty of the ranking.

    Parameters
    ----------
    scores : one row per (run, key[, epoch], metric) with ``value``, the ``policy`` column,
        the ``strata`` columns and the engine's optional columns (``errored``, ``_policy`` /
        ``source_format`` for the errors policy, ``skip_reason``, ``metadata``).
    policy : the column naming each row's policy (default ``run_id``: one run, one policy).
        Several runs of one policy on one suite's key are reduced like epochs.
    strata : the columns naming a suite (e.g. ``benchmark_id, split``): keys pair within it
        and the strengths' intervals resample keys within it.
    policies : the policies to rank, in the matrix's order (default: all, sorted).
    rule : the verdict rule of the pairs (default :class:`StatisticalRule`, Holm).
    errors : the errors policy (``failure`` / ``exclude``); None: each run's harness's.
    penalty : the Bradley-Terry L2 penalty (:data:`~hylo_analytics.stats.bradley_terry.
        DEFAULT_PENALTY`): keeps a never-beaten policy finite.
    strength_ci : ``sandwich`` (default: the stratified bootstrap's variance of the keys'
        score terms, a Wald interval) or ``bootstrap`` (``n_resamples`` stratified resamples
        of keys, each refitted: up to 100 policies).
    n_resamples, level, seed : the bootstrap of numeric pairs (and of the strengths under
        ``strength_ci="bootstrap"``); ``level`` is every interval's.
    progress : a progress bar on a terminal or in Jupyter (None: when one is watching; it
        shows after two seconds, so a quick ranking prints none).
    cluster : a column whose values cluster the keys within a suite (``task_id``), when the
        population is the clusters: every pair's interval and test are the CR2 cluster-robust
        ones (``ci_method`` ``cr2``; the matrix gains ``n_clusters``, ``ci_se``, ``ci_df``)
        and the strengths' sandwich sums the keys' score terms within clusters (resampling
        clusters within suites). Not with ``strength_ci="bootstrap"``.

    A metric without a known direction gets two-sided tests, so no pair is separated (every
    rank set is 1-N), and its strengths read a higher value as a win.
    """
    _check_level(level)
    base = _policy_rows(scores, policy, list(strata), metric, cluster)
    held = sorted(set(base["_pol"].to_list()))
    names = names_ranked(policies, held, metric)
    base = base.filter(pl.col("_pol").is_in(names))
    frame = base.rename({"_pol": "run_id", "_key": "key"})
    keep = ["_cluster"] if cluster is not None else []
    reduced, _, _, applied = prepare_scores(frame, names[:-1], names[-1], [metric], [], ["key"],
                                            reducer, errors, keep)  # fmt: skip
    stratum = base.select("_key", "_stratum").unique("_key")
    long = reduced.select(
        *keep, _pol="run_id", _key="key", value=pl.col("value").cast(pl.Float64)
    ).join(stratum, on="_key", how="left")
    declared = declared_pairs(scores) if "metadata" in scores.columns else None
    values = PolicyValues.from_frame(long, names, applied)
    return _ranking(values, metric, declared, directions, rule, penalty, strength_ci,
                    IntervalSpec("auto", level, n_resamples, seed), progress, cluster)  # fmt: skip


@pinned
def rank_runs(
    store: ParquetStore,
    runs: Sequence[str] | None = None,
    *,
    policy: str = "agent_name",
    strata: Sequence[str] = ("benchmark_id", "split"),
    metric: str = "success",
    source: str | None = None,
    policies: Sequence[str] | None = None,
    directions: Mapping[str, Direction] | None = None,
    rule: Rule | None = None,
    errors: Errors | None = None,
    reducer: Reducer | None = "mean",
    penalty: float = DEFAULT_PENALTY,
    strength_ci: StrengthCI = "sandwich",
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
    progress: bool | None = None,
    cluster: str | None = None,
) -> Ranking:
    """:func:`rank_policies` over the store's resolved scores (``Store.rank``), in one query.

    ``runs``: ids, unique prefixes or selectors, a selector naming every run it matches
    (``agent=pi05``: pi05 on every suite; default every run); ``policy`` and ``strata`` are
    run fields (``run_id, agent_name, agent_version, benchmark_id, split``): by default a
    policy is an agent and its runs pair by suite. The values are reduced where they lie
    (``sql/queries/rank_values.sql``: the errors policy, then the key's epochs and the
    policy's runs by ``reducer``) and leave DuckDB as numbers, so a ranking of 2,000
    policies reads one row of codes per policy and key. The other options are
    :func:`rank_policies`'s.
    """
    _check_level(level)
    bad = [c for c in [policy, *strata] if c not in _RUN_COLUMNS]
    if bad:
        raise InputError(f"rank: {bad} are not run fields; use {', '.join(_RUN_COLUMNS)}")
    policy_arg = check_errors(errors, "rank: errors")
    if reducer is not None and reducer not in _REDUCERS:
        raise InputError(f"reducer must be one of {tuple(_REDUCERS)} (never first/last), got "
                         f"{reducer!r}")  # fmt: skip
    values, declared, left_out = store_values(
        store, runs, policy=policy, strata=strata, metric=metric, source=source,
        policies=policies, errors=policy_arg, reducer=reducer, cluster=cluster,
    )  # fmt: skip
    ranking = _ranking(values, metric, declared, directions, rule, penalty, strength_ci,
                       IntervalSpec("auto", level, n_resamples, seed), progress,
                       cluster)  # fmt: skip
    if left_out.is_empty():
        return ranking
    shown = ", ".join(f"{r} ({why})" for r, why in left_out.head(3).iter_rows())
    more = f" and {left_out.height - 3:,} more" if left_out.height > 3 else ""
    note = f"{left_out.height:,} run(s) left out of the ranking: {shown}{more}"
    return replace(ranking, left_out=left_out, notes=(*ranking.notes, note))


def _ranking(
    values: PolicyValues,
    metric: str,
    declared: pl.DataFrame | None,
    directions: Mapping[str, Direction] | None,
    rule: Rule | None,
    penalty: float,
    strength_ci: StrengthCI,
    spec: IntervalSpec,
    progress: bool | None,
    cluster: str | None = None,
) -> Ranking:
    """The matrix, strengths and ranks of ``values`` (the part both readers share)."""
    if strength_ci not in STRENGTH_CIS:
        raise InputError(f"strength_ci must be one of {STRENGTH_CIS}, got {strength_ci!r}")
    spec = ranking_spec(spec, strength_ci, cluster)
    names = list(values.policies)
    if strength_ci == "bootstrap" and len(names) > _BOOTSTRAP_MAX:
        raise InputError(
            f"rank: strength_ci='bootstrap' refits every resample and takes at most "
            f"{_BOOTSTRAP_MAX} policies (got {len(names):,}); the default 'sandwich' estimates "
            "the same stratified-bootstrap variance in closed form"
        )
    rule = rule or StatisticalRule()
    dirs = resolve_directions([metric], explicit=directions, declared=one_direction(declared))
    direction: tuple[str, str | None] = dirs.get(metric, ("unknown", None))
    n = len(names)
    chunks = -(-(n * (n - 1) // 2) // PAIR_CHUNK)
    with _progress.progress(2 + 2 * chunks, "rank", enabled=progress) as bar:
        bar.set_postfix_str(f"{n:,} policies: counting pairs")
        counts = [pair_counts(values)]
        bar.update()
        flip = direction[0] == "minimize"  # a win is being better in the metric's direction
        wins = counts[0].wins.T if flip else counts[0].wins
        # the strengths first: their N x N work is done before the matrix's two million rows
        # exist, and the counts are dropped as soon as the matrix has read them
        bar.set_postfix_str("strengths")
        strengths = _strengths(values, wins, flip, penalty, strength_ci, spec, cluster)
        # a policy no key pairs has no strength (only the prior's 0): the ranks order it by
        # its mean, after the policies the keys place
        alone = alone_policies(counts[0], n)
        strengths = strengths.with_columns(
            strength=pl.when(pl.Series(alone)).then(None).otherwise(pl.col("strength"))
        )
        bar.update()
        bar.set_postfix_str(f"{n * (n - 1) // 2:,} pairs: tests and verdicts")
        matrix = pair_statistics(values, counts, metric=metric, direction=direction,
                                 rule=rule, spec=spec, bar=bar)  # fmt: skip
    strengths = strengths.with_columns(mean=pl.Series(values.policy_means()).fill_nan(None))
    ranks = _ranks(matrix, strengths, names, flip)
    notes = _unpaired_note(matrix, names)
    if cluster is not None:
        notes = (*notes, ranking_note(matrix, values, cluster))
    return Ranking(matrix, ranks, strengths, metric, tuple(names), penalty, spec.level,
                   spec.n_resamples, strength_ci, notes)  # fmt: skip


def _unpaired_note(matrix: pl.DataFrame, names: list[str]) -> tuple[str, ...]:
    """Policies that share no key with any other (an aggregate of counts, a suite no other
    ran), said once: those compared by their rates instead, and those nothing places."""
    paired = matrix.filter(pl.col("n_pairs") > 0)
    seen = set(paired["policy"].cast(pl.String).to_list()) | set(
        paired["opponent"].cast(pl.String).to_list()
    )
    alone = [n for n in names if n not in seen]
    if not alone:
        return ()
    by_rates = matrix.filter(pl.col("test").cast(pl.String).str.ends_with("(unpaired)"))
    rated = set(by_rates["policy"].cast(pl.String).to_list()) | set(
        by_rates["opponent"].cast(pl.String).to_list()
    )
    after = " after the policies the keys rank" if seen else ""
    notes = []
    for group, said in (
        ([n for n in alone if n in rated],
         "share no key with any other: they are compared by their rates, as independent "
         "samples of the suites they share (the Miettinen-Nurminen score test in one suite, "
         f"the z test of the averaged difference across several), and ordered by mean{after}; "
         "no strength is fitted for them"),
        ([n for n in alone if n not in rated],
         "share no key with any other and no 0/1 rate to compare with another such "
         "policy's in a suite: no test can place them, so "
         f"their rank set is every rank, they are ordered by mean{after} and have no strength; "
         "compare their means (aggregate) instead"),
    ):  # fmt: skip
        if group:
            more = f" and {len(group) - 3:,} more" if len(group) > 3 else ""
            notes.append(f"{len(group):,} polic(ies) ({', '.join(group[:3])}{more}) {said}")
    return tuple(notes)


def _policy_rows(
    scores: pl.DataFrame, policy: str, strata: list[str], metric: str, cluster: str | None = None
) -> pl.DataFrame:
    """The rows of ``metric`` with ``_pol`` (the policy) and ``_key`` (suite and key), and
    ``_cluster`` (the ``cluster`` column as text) when clustered."""
    need = ["key", "metric", "value", policy, *strata, *([cluster] if cluster else [])]
    missing = [c for c in need if c not in scores.columns]
    if missing:
        raise InputError(f"rank: the scores lack column(s) {missing}; they have {scores.columns}")
    keep = [c for c in _KEEP if c in scores.columns]
    key = pl.concat_str([pl.col(c).cast(pl.String).fill_null("") for c in [*strata, "key"]],
                        separator=_SEP)  # fmt: skip
    stratum = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("") for c in strata] or [pl.lit("")], separator=_SEP
    )
    return (
        scores.lazy()
        # a null key pairs with nothing (compare's join never matches it)
        .filter(pl.col("metric").cast(pl.String) == metric, pl.col("key").is_not_null())
        .select(
            pl.col(policy).cast(pl.String).alias("_pol"),
            key.alias("_key"),
            stratum.alias("_stratum"),
            pl.col("metric").cast(pl.String),
            "value",
            *keep,
            *([pl.col(cluster).cast(pl.String).alias("_cluster")] if cluster else []),
        )
        .collect()
    )


def _oriented(values: npt.NDArray[np.float64], flip: bool) -> npt.NDArray[np.float64]:
    return -values if flip else values


def _strengths(
    values: PolicyValues,
    wins: npt.NDArray[np.float64],
    flip: bool,
    penalty: float,
    strength_ci: StrengthCI,
    spec: IntervalSpec,
    cluster: str | None = None,
) -> pl.DataFrame:
    """Bradley-Terry strengths of the keys' games, with their interval (see the module)."""
    theta = bradley_terry(wins, penalty=penalty)
    if strength_ci == "bootstrap":
        lo, hi = _bootstrap_strengths(values, flip, penalty, spec)
    else:
        meat, sums, sizes = strength_meat(values, theta, flip)
        cov = sandwich_covariance(theta, wins, meat, sums, sizes, penalty=penalty)
        half = z_value(spec.level) * np.sqrt(np.maximum(np.diag(cov), 0.0))
        lo, hi = theta - half, theta + half
    # a policy that played no game (it shares no key with any other, or tied on every one)
    # has a strength only its prior gives: no interval, rather than one of zero width
    played = (wins.sum(axis=1) + wins.sum(axis=0)) > 0
    lo, hi = np.where(played, lo, np.nan), np.where(played, hi, np.nan)
    return pl.DataFrame(
        {
            "policy": list(values.policies),
            "strength": theta,
            "strength_low": pl.Series(lo).fill_nan(None),
            "strength_high": pl.Series(hi).fill_nan(None),
            "wins": wins.sum(axis=1).astype(np.int64),
            "losses": wins.sum(axis=0).astype(np.int64),
            "strength_method": strength_ci + (f" (clusters of {cluster})" if cluster else ""),
        }
    )


def _bootstrap_strengths(
    values: PolicyValues, flip: bool, penalty: float, spec: IntervalSpec
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Percentile intervals of the strengths refitted on stratified resamples of keys; the
    win matrices of a chunk of resamples are one product (counts x games)."""
    dense = np.concatenate([_oriented(v, flip) for _, _, v, _ in values.blocks()])
    n = dense.shape[1]
    won = np.nan_to_num(dense[:, :, None] - dense[:, None, :], nan=0.0) > 0
    decisive: npt.NDArray[np.bool_] = np.asarray(won.reshape(len(dense), -1).any(axis=1))
    games = won[decisive].reshape(int(decisive.sum()), -1).astype(np.float64)
    rng = np.random.default_rng(spec.seed)
    fits = []
    for s in range(0, spec.n_resamples, _CHUNK):
        drawn = _resample_counts(
            values.key_stratum, decisive, min(_CHUNK, spec.n_resamples - s), rng
        )
        fits.append(bradley_terry((drawn @ games).reshape(-1, n, n), penalty=penalty))
    tail = (1 - spec.level) / 2
    lo, hi = np.quantile(np.concatenate(fits), [tail, 1 - tail], axis=0)
    return np.asarray(lo), np.asarray(hi)


def _resample_counts(
    stratum: npt.NDArray[np.int64],
    decisive: npt.NDArray[np.bool_],
    n_resamples: int,
    rng: np.random.Generator,
) -> npt.NDArray[np.float64]:
    """(resamples x decisive keys): how often each decisive key is drawn when every stratum's
    keys are resampled with replacement; the stratum's other keys are one pooled cell (they
    add no game), so the draw is one multinomial per stratum, not one per key."""
    out = np.zeros((n_resamples, int(decisive.sum())))
    col = np.cumsum(decisive) - 1
    for s in np.unique(stratum):  # one draw per suite (a handful), never per key
        keys = stratum == s
        size, hits = int(keys.sum()), decisive & keys
        k = int(hits.sum())
        if k == 0:
            continue
        p = np.append(np.full(k, 1 / size), 1 - k / size)
        out[:, col[hits]] = rng.multinomial(size, np.clip(p, 0, 1), size=n_resamples)[:, :k]
    return out


def _ranks(
    matrix: pl.DataFrame, strengths: pl.DataFrame, names: list[str], flip: bool = False
) -> pl.DataFrame:
    """Rank sets (best = 1 + separated above, worst = N - separated below) and tie groups,
    in the order of the strengths, then (the policies without one) of the means in the
    metric's direction (``flip``: lower is better)."""
    n = len(names)
    i = matrix["policy"].cast(pl.Enum(names)).to_physical().to_numpy().astype(np.int64)
    j = matrix["opponent"].cast(pl.Enum(names)).to_physical().to_numpy().astype(np.int64)
    verdict = matrix["verdict"].to_numpy()
    up, down = verdict == "improved", verdict == "regressed"  # policy i above / below j
    n_above = np.bincount(i[down], minlength=n) + np.bincount(j[up], minlength=n)
    n_below = np.bincount(i[up], minlength=n) + np.bincount(j[down], minlength=n)
    ranked = strengths.with_columns(
        n_above=pl.Series(n_above, dtype=pl.Int64), n_below=pl.Series(n_below, dtype=pl.Int64)
    )
    ranked = ranked.with_row_index("_idx").sort(
        "strength", "mean", descending=[True, not flip], nulls_last=True, maintain_order=True
    )
    order = ranked["_idx"].to_numpy().astype(np.int64)
    separated = np.zeros((n, n), dtype=bool)
    separated[i[up | down], j[up | down]] = True
    separated |= separated.T
    best = (1 + pl.col("n_above")).cast(pl.Int64)
    worst = (n - pl.col("n_below")).cast(pl.Int64)
    return (
        ranked.with_row_index("rank", offset=1)
        .with_columns(
            pl.col("rank").cast(pl.Int64),
            rank_best=best,
            rank_worst=worst,
            rank_set=pl.when(best == worst)
            .then(best.cast(pl.String))
            .otherwise(pl.format("{}-{}", best, worst)),
            tie_group=pl.Series(_tie_groups(separated[np.ix_(order, order)]), dtype=pl.Int64),
        )
        .select(
            "rank",
            "policy",
            "rank_set",
            "rank_best",
            "rank_worst",
            "tie_group",
            "n_above",
            "n_below",
            "mean",
            "strength",
            "strength_low",
            "strength_high",
            "strength_method",
        )
    )


def _tie_groups(separated: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Tie groups down a ranking (``separated`` in rank order): a group grows while its next
    policy is separated from none of its members. A loop over groups, not policies: each
    step finds its group's end at once (the first position separated from an earlier one)."""
    n = len(separated)
    later = np.triu(separated, 1)
    has = later.any(axis=1)
    first = np.where(has, later.argmax(axis=1), n)  # each policy's first separated below it
    groups = np.empty(n, dtype=np.int64)
    start, group = 0, 1
    while start < n:
        reach = np.minimum.accumulate(first[start:])  # the group can't pass any member's
        pos = np.arange(start, n)
        ends = np.flatnonzero(pos[1:] >= reach[:-1]) if n - start > 1 else np.array([], int)
        end = start + 1 + int(ends[0]) if ends.size else n
        groups[start:end] = group
        start, group = end, group + 1
    return groups
