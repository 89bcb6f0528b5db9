"""The parts of a trend after its tests: the couples as engine rows, regression points, flips.

:mod:`hylo_analytics.compare.trends` lays the versions out and calls the engine; this module
turns the engine's rows into the regression point of each task (the first version whose
verdict is ``regressed``) with a note in words, and lists the keys that flipped there
(:func:`~hylo_analytics.compare.flips.flip_scores`, paired as the test paired them), each
side's harness errors labelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from hylo_analytics.compare.flips import flip_scores

__all__ = ["REF", "SEP", "flips", "labelled", "regressions", "stacked"]

REF = "\x00best earlier"  # the reference run: each couple's best earlier version
SEP = "\x1f"  # between the version's position, the task's code and the key


def stacked(frame: pl.DataFrame, couples: pl.DataFrame, n_keys: int) -> pl.DataFrame:
    """Each couple's rows as the engine pairs them: the version's rows under its own run id
    (its position) and the best earlier version's rows under the reference run, both with
    their key codes offset by the version's position (``position * n_keys + key``), so a key
    pairs with itself, at the two versions of one couple only."""
    pairs = couples.select("_task", "position", "best_position")
    later = frame.join(pairs, left_on=["_task", "run_id"], right_on=["_task", "position"])
    later = later.with_columns(pl.col("run_id").alias("position"))
    earlier = frame.join(pairs, left_on=["_task", "run_id"], right_on=["_task", "best_position"])
    coded = (pl.col("position") * n_keys + pl.col("key")).alias("key")
    cols = [c for c in frame.columns if c not in ("run_id", "key")]
    return pl.concat(
        [
            later.select(pl.col("position").cast(pl.String).alias("run_id"), coded, *cols),
            earlier.select(pl.lit(REF).alias("run_id"), coded, *cols),
        ],
        how="vertical_relaxed",
    )


def labelled(frame: pl.DataFrame, versions: Sequence[str]) -> pl.DataFrame:
    """``frame`` with ``version`` and ``best_version``: the labels of its positions."""
    labels = dict(enumerate(versions))
    name = pl.col("position").replace_strict(labels, return_dtype=pl.String)
    best = pl.col("best_position").replace_strict(labels, return_dtype=pl.String)
    cols = frame.columns
    at = cols.index("position")
    out = frame.with_columns(name.alias("version"), best.alias("best_version"))
    return out.select(*cols[:at], "version", "best_version", *cols[at:])


def _num(e: pl.Expr) -> pl.Expr:
    return e.round_sig_figs(3).cast(pl.String)


def regressions(tests: pl.DataFrame, rates: pl.DataFrame, tasks: list[str]) -> pl.DataFrame:
    """Per task: its regression point (the first version whose verdict is ``regressed``)
    with the interval the verdict was decided on, or, when there is none, the closest call
    (the smallest adjusted p), with a note in words."""
    first = (
        tests.filter(pl.col("verdict") == "regressed")
        .sort("_task", "position")
        .group_by("_task", maintain_order=True)
        .first()
    )
    closest = (
        tests.filter(pl.col("p_adjusted").is_not_null())
        .sort("_task", "p_adjusted", "position")
        .group_by("_task", maintain_order=True)
        .agg(
            pl.col("version").first().alias("_c_version"),
            pl.col("best_version").first().alias("_c_best"),
            pl.col("p_adjusted").first().alias("_c_p"),
        )
    )
    tested = tests.group_by("_task").agg(n_tested=pl.len().cast(pl.Int64))
    errs = rates.select("_task", "position", "n_errors")
    keep = ["version", "position", "best_version", "best_position", "rate", "best_rate", "diff",
            "ci_adj_low", "ci_adj_high", "ci_adj_level", "n_pairs", "wins", "losses",
            "n_dropped", "test", "p_worse", "p_adjusted", "family_size"]  # fmt: skip
    out = (
        rates.select(*tasks, "_task", "errors")
        .unique("_task", keep="first")
        .join(first.select("_task", *keep), on="_task", how="left")
        .join(errs, on=["_task", "position"], how="left")
        .join(
            errs.rename({"position": "best_position", "n_errors": "best_n_errors"}),
            on=["_task", "best_position"],
            how="left",
        )
        .join(tested, on="_task", how="left")
        .join(closest, on="_task", how="left")
        .with_columns(
            regressed=pl.col("version").is_not_null(),
            n_tested=pl.col("n_tested").fill_null(0),
        )
        .sort("_task")
    )
    out = out.with_columns(note=_note())
    return out.select(
        *tasks, "regressed", *keep[:7], "ci_adj_low", "ci_adj_high", "ci_adj_level",
        "p_worse", "p_adjusted", "family_size", "n_pairs", "wins", "losses", "n_dropped",
        "n_errors", "best_n_errors", "n_tested", "test", "errors", "note",
    )  # fmt: skip


def _note() -> pl.Expr:
    """The regression point in words; log text only ever an argument of the format."""
    level = (pl.col("ci_adj_level") * 100).round(2).cast(pl.String)
    fell = pl.format(
        "{} is worse than {}, the best earlier version: {} against {} (difference {}, "
        "{}% CI [{}, {}]); p(worse) {}, adjusted {} over {} test(s)",
        "version", "best_version", _num(pl.col("rate")), _num(pl.col("best_rate")),
        _num(pl.col("diff")), level, _num(pl.col("ci_adj_low")), _num(pl.col("ci_adj_high")),
        _num(pl.col("p_worse")), _num(pl.col("p_adjusted")),
        pl.col("family_size").cast(pl.String),
    )  # fmt: skip
    errored = pl.col("n_errors").fill_null(0)
    failure = pl.col("errors") == "failure"
    harness = (
        pl.when((errored > 0) & failure)
        .then(
            pl.format(
                "; {} episode(s) of {} were harness errors, counted as failures "
                "(errors=failure): the flips say which",
                errored.cast(pl.String),
                "version",
            )
        )
        .when(errored > 0)
        .then(
            pl.format(
                "; {} errored episode(s) of {} left out (errors={})",
                errored.cast(pl.String),
                "version",
                "errors",
            )
        )
        .otherwise(pl.lit(""))
    )
    none = (
        pl.when(pl.col("n_tested") == 0)
        .then(pl.lit("rated at one version only: nothing to compare"))
        .when(pl.col("_c_p").is_null() | (pl.col("_c_p") >= 1))
        .then(
            pl.format(
                "no version significantly worse than its best earlier one ({} tested)",
                pl.col("n_tested").cast(pl.String),
            )
        )
        .otherwise(
            pl.format(
                "no version significantly worse than its best earlier one ({} tested); the "
                "closest: {} against {}, adjusted p(worse) {}",
                pl.col("n_tested").cast(pl.String),
                "_c_version",
                "_c_best",
                _num(pl.col("_c_p")),
            )
        )
    )
    return pl.when(pl.col("version").is_not_null()).then(fell + harness).otherwise(none)


_FLIP_SCHEMA: dict[str, Any] = {
    "version": pl.String, "best_version": pl.String, "key": pl.String, "change": pl.String,
    "value": pl.Float64, "best_value": pl.Float64, "diff": pl.Float64, "errored": pl.Boolean,
    "best_errored": pl.Boolean, "errors": pl.String, "note": pl.String,
}  # fmt: skip


def flips(
    frame: pl.DataFrame,
    keys: pl.DataFrame,
    found: pl.DataFrame,
    tasks: list[str],
    metric: str,
    direction: str,
    options: Mapping[str, Any],
    versions: Sequence[str],
) -> pl.DataFrame:
    """The keys that flipped at each regression point, paired as its test paired them, with
    each side's harness errors: ``errored`` (the later version) and ``best_errored`` are
    true when an epoch (or a pooled run) of the key errored there."""
    points = found.filter("regressed").select(*tasks, "position", "best_position")
    if points.is_empty():
        schema = {t: keys.schema[t] for t in tasks} | _FLIP_SCHEMA
        return pl.DataFrame(schema=schema)
    couples = points.join(keys.select(*tasks, "_task").unique("_task"), on=tasks, nulls_equal=True)
    n_keys = keys.height
    got = flip_scores(
        stacked(frame, couples, n_keys),
        candidates=[str(p) for p in couples["position"].unique().sort().to_list()],
        parent=REF,
        metrics=[metric],
        by=["_task"],
        directions={metric: direction},  # type: ignore[dict-item]
        errors=options["errors"],
        reducer=options["reducer"],
    )
    got = (
        got.with_columns(
            pl.col("candidate").cast(pl.Int64).alias("position"),
            (pl.col("key") % n_keys).alias("key"),
        )
        .join(couples, on=["_task", "position"])
        .join(keys.select("key", "_key"), on="key")
    )
    got = labelled(_errored(got, frame), versions)
    return got.select(
        *tasks, "version", "best_version", pl.col("_key").alias("key"), "change",
        pl.col("candidate_value").alias("value"), pl.col("parent_value").alias("best_value"),
        "diff", "errored", "best_errored", "errors", note=_flip_note(),
    ).sort(*tasks, "version", nulls_last=True, maintain_order=True)  # fmt: skip


def _errored(got: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """``errored`` / ``best_errored``: whether the key errored at either version."""
    if "errored" not in frame.columns:
        return got.with_columns(
            errored=pl.lit(None, pl.Boolean), best_errored=pl.lit(None, pl.Boolean)
        )
    flags = (
        frame.filter(pl.col("errored").fill_null(False))
        .select("run_id", "key")
        .unique()
        .with_columns(_e=pl.lit(True))
    )
    got = got.join(
        flags.rename({"run_id": "position", "_e": "errored"}), on=["position", "key"], how="left"
    ).join(
        flags.rename({"run_id": "best_position", "_e": "best_errored"}),
        on=["best_position", "key"], how="left",
    )  # fmt: skip
    return got.with_columns(pl.col("errored", "best_errored").fill_null(False))


def _flip_note() -> pl.Expr:
    """A flip that rests on a harness error says so (issue 40: never a silent fix)."""
    policy = (
        pl.when(pl.col("errors") == "failure")
        .then(pl.lit("counted as a failure"))
        .otherwise(pl.lit("its other runs or epochs counted"))
    )
    return (
        pl.when(pl.col("errored") & pl.col("best_errored"))
        .then(pl.format("harness errors at both versions ({})", policy))
        .when(pl.col("errored"))
        .then(
            pl.format(
                "a harness error at {} ({}): not necessarily the agent's failure", "version", policy
            )
        )
        .when(pl.col("best_errored"))
        .then(
            pl.format("a harness error at {} ({}): not necessarily a fix", "best_version", policy)
        )
        .otherwise(pl.lit(""))
    )
