"""A ranking of N policies with its uncertainty: the pairwise matrix, rank sets, strengths.

:func:`rank_policies` takes a long scores frame in which a ``policy`` column names each row's
policy (a run, or the runs of one agent) and ``strata`` columns name its suite; keys pair
within a suite. It answers three questions, each from the one paired engine:

- **the matrix**: every pair of policies compared by
  :func:`~hylo_analytics.compare.compare_scores`, all N(N-1)/2 pairs in one call and one
  family (``family="level"``), so the Holm adjustment and the verdict's interval run over the
  whole matrix: a pair is *separated* when its verdict is ``improved`` or ``regressed``;
- **rank sets**: a policy's best possible rank is 1 + the number of policies separated above
  it, its worst N - the number separated below it; policies not separated share ranks;
- **strengths**: a Bradley-Terry log-strength per policy fitted on the discordant pairs (for
  each key and pair of policies, the better one wins one game; ties dropped), penalized
  (:mod:`hylo_analytics.stats.bradley_terry`), centred to sum 0, with percentile intervals
  from a bootstrap of keys within suites (every resample refitted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from hylo_analytics._harness import Errors
from hylo_analytics._html import text
from hylo_analytics.compare._prepare import Reducer, prepare_scores
from hylo_analytics.compare.engine import compare_scores
from hylo_analytics.compare.runs import _Reader
from hylo_analytics.compare.verdicts import Rule, StatisticalRule
from hylo_analytics.errors import InputError, SelectionError
from hylo_analytics.metrics import Direction
from hylo_analytics.stats.bradley_terry import DEFAULT_PENALTY, bradley_terry
from hylo_analytics.stats.closed_form import DEFAULT_LEVEL, _check_level
from hylo_analytics.stats.methods import DEFAULT_RESAMPLES, DEFAULT_SEED, Seed
from hylo_analytics.store import ParquetStore, pinned

__all__ = ["Ranking", "rank_policies", "rank_runs"]

_SEP = "\x1f"
_REF = "\x00opponent"
_KEEP = ("epoch", "skip_reason", "errored", "_policy", "errors_policy", "source_format",
         "metadata", "source")  # fmt: skip
_CHUNK = 1_000  # bootstrap resamples fitted at once (memory: CHUNK x discordant keys)


@dataclass(frozen=True)
class Ranking:
    """What :func:`rank_policies` found, as three polars frames.

    - ``matrix``: one row per pair (``policy`` vs ``opponent``, ``policy`` first in the
      ranking's order) with the engine's columns (wins, mean difference and interval, p and
      Holm-adjusted p over the whole matrix, ``verdict`` of ``policy`` against ``opponent``);
    - ``ranks``: per policy, ``rank`` (by strength), ``rank_best`` / ``rank_worst`` (the rank
      set) and how many policies are separated above (``n_above``) and below (``n_below``);
    - ``strengths``: per policy, the log-strength with its interval, its discordant wins and
      losses, and ``mean`` (the average over suites of its per-suite mean).
    """

    matrix: pl.DataFrame
    ranks: pl.DataFrame
    strengths: pl.DataFrame
    metric: str
    policies: tuple[str, ...]
    penalty: float
    level: float
    n_resamples: int

    def __repr__(self) -> str:
        with pl.Config(tbl_rows=50, tbl_cols=12, float_precision=4):
            return f"Ranking(metric={self.metric!r}, policies={len(self.policies)})\n{self.ranks}"

    def _repr_html_(self) -> str:
        ranks = self.ranks.select(
            "rank",
            "policy",
            rank_set="rank_set",
            mean=pl.format("{}%", (pl.col("mean") * 100).round(2)),
            strength=pl.format(
                "{} [{}, {}]",
                *(pl.col(c).round(3) for c in ("strength", "strength_low", "strength_high")),
            ),
        )
        pts = [(pl.col(c) * 100).round(2) for c in ("mean_diff", "ci_low", "ci_high")]
        pairs = self.matrix.select(
            pair=pl.format("{} vs {}", "policy", "opponent"),
            record=pl.format("{} : {}", "wins", "losses"),
            difference=pl.format("{} pts [{}, {}]", *pts),
            holm_p=pl.format(
                "{} / {}", *(pl.col(c).round_sig_figs(3) for c in ("p_holm", "p_worse_holm"))
            ),
            verdict="verdict",
        )
        intro = (
            f"<strong>Ranking on <code>{text(self.metric)}</code></strong> &mdash; "
            f"{len(self.policies)} policies. Rank sets from the {self.matrix.height} paired "
            "comparisons (Holm over all of them: a policy's best rank is 1 + the policies "
            "separated above it, its worst N - those below); Bradley-Terry log-strengths (sum 0, "
            f"L2 penalty {self.penalty:g}) with {self.level:.0%} bootstrap intervals over keys "
            f"within suites ({self.n_resamples:,} resamples)."
        )
        heads = ["rank", "policy", "rank set", "mean over suites", "log-strength [interval]"]
        pair_heads = ["pair", "wins : losses", "difference [CI]", "Holm p (better / worse)",
                      "verdict of the first"]  # fmt: skip
        return f"<div>{intro}{_table(heads, ranks)}{_table(pair_heads, pairs)}</div>"


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
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: Seed = DEFAULT_SEED,
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
        and the bootstrap resamples keys within it.
    policies : the policies to rank, in the matrix's order (default: all, sorted).
    rule : the verdict rule of the pairs (default :class:`StatisticalRule`, Holm).
    errors : the errors policy (``failure`` / ``exclude``); None: each run's harness's.
    penalty : the Bradley-Terry L2 penalty (:data:`~hylo_analytics.stats.bradley_terry.
        DEFAULT_PENALTY`): keeps a never-beaten policy finite.
    n_resamples, level, seed : the bootstrap of the strengths (and of numeric pairs).

    A metric without a known direction gets two-sided tests, so no pair is separated (every
    rank set is 1-N), and its strengths read a higher value as a win.
    """
    _check_level(level)
    base = _policy_rows(scores, policy, list(strata), metric)
    held = sorted(set(base["_pol"].to_list()))
    names = list(policies) if policies is not None else held
    missing = [p for p in names if p not in held]
    if missing:
        raise SelectionError(f"rank: no scores of {metric!r} for policies {missing}; have {held}")
    if len(set(names)) < 2:
        raise SelectionError(
            f"rank: needs at least two policies, got {names}; select runs of two or more"
        )
    base = base.filter(pl.col("_pol").is_in(names))
    rule = rule or StatisticalRule()
    boot = (n_resamples, level, seed)
    matrix = _matrix(base, names, metric, directions, rule, errors, reducer, boot)
    values, stratum, means = _values(base, names, metric, errors, reducer)
    if matrix["direction"][0] == "minimize":
        values = -values  # a win is being better in the metric's direction
    strengths = _strengths(values, stratum, names, penalty, n_resamples, level, seed)
    strengths = strengths.join(means, on="policy", how="left")
    ranks = _ranks(matrix, strengths, names)
    return Ranking(matrix, ranks, strengths, metric, tuple(names), penalty, level, n_resamples)


_RUN_COLUMNS = ("run_id", "agent_name", "agent_version", "benchmark_id", "split")


@pinned
def rank_runs(
    store: ParquetStore,
    runs: Sequence[str] | None = None,
    *,
    policy: str = "agent_name",
    strata: Sequence[str] = ("benchmark_id", "split"),
    metric: str = "success",
    source: str | None = None,
    **options: Any,
) -> Ranking:
    """:func:`rank_policies` over the store's resolved scores (``Store.rank``).

    ``runs``: ids, unique prefixes or selectors (default every run); ``policy`` and
    ``strata`` are run fields (``run_id, agent_name, agent_version, benchmark_id, split``):
    by default a policy is an agent and its runs pair by suite. Each run's errors convention
    is its harness's unless ``errors=`` says otherwise; ``options`` are
    :func:`rank_policies`'s.
    """
    bad = [c for c in [policy, *strata] if c not in _RUN_COLUMNS]
    if bad:
        raise InputError(f"rank: {bad} are not run fields; use {', '.join(_RUN_COLUMNS)}")
    if runs is None:
        ids = store.sql("SELECT run_id FROM stg_runs ORDER BY run_id")["run_id"].to_list()
    else:
        ids = store.resolve_runs(list(runs))
    meta = store.sql(
        f"SELECT {', '.join(_RUN_COLUMNS)}, run_errors(errors_policy, source_format) AS _policy "
        "FROM stg_runs WHERE list_contains($runs, run_id)",
        {"runs": ids},
    )
    conventions = dict(zip(meta["run_id"].to_list(), meta["_policy"].to_list(), strict=True))
    scores = _Reader(store, ids, source, None, {}, ()).scores([metric], conventions)
    fields = [c for c in dict.fromkeys([policy, *strata]) if c != "run_id"]
    scores = scores.join(meta.select("run_id", *fields), on="run_id", how="left")
    return rank_policies(scores, policy=policy, strata=strata, metric=metric, **options)


def _policy_rows(scores: pl.DataFrame, policy: str, strata: list[str], metric: str) -> pl.DataFrame:
    """The rows of ``metric`` with ``_pol`` (the policy) and ``_key`` (suite and key)."""
    missing = [c for c in ["key", "metric", "value", policy, *strata] if c not in scores.columns]
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
        .filter(pl.col("metric").cast(pl.String) == metric)
        .select(
            pl.col(policy).cast(pl.String).alias("_pol"),
            key.alias("_key"),
            stratum.alias("_stratum"),
            pl.col("metric").cast(pl.String),
            "value",
            *keep,
        )
        .collect()
    )


def _matrix(
    base: pl.DataFrame,
    names: list[str],
    metric: str,
    directions: Mapping[str, Direction] | None,
    rule: Rule,
    errors: Errors | None,
    reducer: Reducer | None,
    boot: tuple[int, float, Seed],
) -> pl.DataFrame:
    """Every pair through the engine in one call: pair ``i < j`` is a candidate run holding
    policy i's rows and one reference run holds policy j's rows, their keys prefixed by the
    pair, so ``family="level"`` is the whole matrix."""
    idx = {n: i for i, n in enumerate(names)}
    pairs = pl.DataFrame(
        [(a, b) for a in names for b in names if idx[a] < idx[b]],
        schema={"policy": pl.String, "opponent": pl.String},
        orient="row",
    ).with_row_index("_pair")
    pairs = pairs.with_columns(pl.col("_pair").cast(pl.String))  # a pair's run id: its number
    rest = [c for c in base.columns if c not in ("_pol", "_key", "_stratum")]
    key = pl.format("{}{}{}", "_pair", pl.lit(_SEP), "_key").alias("key")
    cand = base.join(pairs, left_on="_pol", right_on="policy").select(
        pl.col("_pair").alias("run_id"), key, *rest
    )
    ref = base.join(pairs, left_on="_pol", right_on="opponent").select(
        pl.lit(_REF).alias("run_id"), key, *rest
    )
    out = compare_scores(
        pl.concat([cand, ref], how="vertical_relaxed"),
        candidates=pairs["_pair"].to_list(),
        parent=_REF,
        metrics=[metric],
        directions=directions,
        rule=rule,
        family="level",
        errors=errors,
        reducer=reducer,
        n_resamples=boot[0],
        level=boot[1],
        seed=boot[2],
    ).filter(pl.col("level") == "overall")
    out = out.join(pairs, left_on="candidate", right_on="_pair").rename(
        {
            "candidate_wins": "wins",
            "parent_wins": "losses",
            "mean_candidate": "mean_policy",
            "mean_parent": "mean_opponent",
        }
    )
    # the pair's own keys, not the reference run's (which holds every pair's)
    # (the gate is compare_runs'; rank_runs has none: no forced rows)
    out = out.drop("candidate", "parent", "level", "n_unmatched", "family", "forced", "gate_note")
    order = pl.col("policy").replace_strict(idx, return_dtype=pl.Int64)
    opp = pl.col("opponent").replace_strict(idx, return_dtype=pl.Int64)
    first = ["policy", "opponent", "metric", "direction", "n_pairs", "wins", "losses", "ties"]
    return out.sort(order, opp).select(*first, pl.exclude(first))


def _values(
    base: pl.DataFrame,
    names: list[str],
    metric: str,
    errors: Errors | None,
    reducer: Reducer | None,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64], pl.DataFrame]:
    """The (keys x policies) values the pairs compare, after the engine's errors policy and
    epoch reduction (NaN: no valid value), each key's stratum index, and each policy's
    ``mean``: the average over suites of its per-suite mean (as papers average suites)."""
    frame = base.rename({"_pol": "run_id", "_key": "key"})
    reduced, _, _, _ = prepare_scores(frame, names[:-1], names[-1], [metric], [], ["key"], reducer,
                                errors)  # fmt: skip
    strata = base.select("_key", "_stratum").unique("_key")
    long = reduced.select("run_id", "key", pl.col("value").cast(pl.Float64)).join(
        strata, left_on="key", right_on="_key", how="left"
    )
    means = (
        long.group_by("run_id", "_stratum")
        .agg(pl.col("value").mean())
        .group_by("run_id")
        .agg(mean=pl.col("value").mean())
        .rename({"run_id": "policy"})
    )
    wide = long.pivot(on="run_id", index=["key", "_stratum"], values="value").sort(
        "_stratum", "key"
    )
    for n in names:
        if n not in wide.columns:
            wide = wide.with_columns(pl.lit(None, pl.Float64).alias(n))
    values = wide.select(pl.col(n) for n in names).to_numpy().astype(np.float64)
    codes = wide["_stratum"].cast(pl.Categorical).to_physical().to_numpy().astype(np.int64)
    return values, codes, means


def _strengths(
    values: npt.NDArray[np.float64],
    stratum: npt.NDArray[np.int64],
    names: list[str],
    penalty: float,
    n_resamples: int,
    level: float,
    seed: Seed,
) -> pl.DataFrame:
    """Bradley-Terry strengths of the keys' wins, with a bootstrap of keys within strata."""
    diff = values[:, :, None] - values[:, None, :]
    won = np.nan_to_num(diff, nan=0.0) > 0  # (keys, i, j): i beat j on the key
    decisive: npt.NDArray[np.bool_] = np.asarray(won.reshape(len(values), -1).any(axis=1))
    games = won[decisive].reshape(int(decisive.sum()), -1).astype(np.float64)
    n = len(names)
    wins = games.sum(axis=0).reshape(n, n)
    theta = bradley_terry(wins, penalty=penalty)
    rng = np.random.default_rng(seed)
    # the win matrices of a chunk of resamples are one product (counts x games): memory
    # stays at a chunk's counts whatever n_resamples is
    fits = np.concatenate(
        [
            bradley_terry(
                (
                    _resample_counts(stratum, decisive, min(_CHUNK, n_resamples - s), rng) @ games
                ).reshape(-1, n, n),
                penalty=penalty,
            )
            for s in range(0, n_resamples, _CHUNK)
        ]
    )
    tail = (1 - level) / 2
    lo, hi = np.quantile(fits, [tail, 1 - tail], axis=0)
    return pl.DataFrame(
        {
            "policy": names,
            "strength": theta,
            "strength_low": lo,
            "strength_high": hi,
            "wins": wins.sum(axis=1).astype(np.int64),
            "losses": wins.sum(axis=0).astype(np.int64),
        }
    )


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


def _ranks(matrix: pl.DataFrame, strengths: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Rank sets: best = 1 + separated above, worst = N - separated below."""
    n = len(names)
    above = pl.concat(
        [
            matrix.filter(pl.col("verdict") == "regressed").select(p="policy"),
            matrix.filter(pl.col("verdict") == "improved").select(p="opponent"),
        ]
    )
    below = pl.concat(
        [
            matrix.filter(pl.col("verdict") == "improved").select(p="policy"),
            matrix.filter(pl.col("verdict") == "regressed").select(p="opponent"),
        ]
    )
    counted = (
        pl.DataFrame({"policy": names})
        .join(above.group_by("p").len("n_above"), left_on="policy", right_on="p", how="left")
        .join(below.group_by("p").len("n_below"), left_on="policy", right_on="p", how="left")
        .with_columns(pl.col("n_above", "n_below").fill_null(0).cast(pl.Int64))
    )
    best = (1 + pl.col("n_above")).cast(pl.Int64)
    worst = (n - pl.col("n_below")).cast(pl.Int64)
    ranked = strengths.sort("strength", descending=True, maintain_order=True).with_row_index(
        "rank", offset=1
    )
    return (
        ranked.join(counted, on="policy")
        .with_columns(
            pl.col("rank").cast(pl.Int64),
            rank_best=best,
            rank_worst=worst,
            rank_set=pl.when(best == worst)
            .then(best.cast(pl.String))
            .otherwise(pl.format("{}-{}", best, worst)),
        )
        .select(
            "rank",
            "policy",
            "rank_set",
            "rank_best",
            "rank_worst",
            "n_above",
            "n_below",
            "mean",
            "strength",
            "strength_low",
            "strength_high",
        )
        .sort("rank")
    )
