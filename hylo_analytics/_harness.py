"""What a harness means by its rate: the errors policy, and each source format's convention.

An episode the harness could not finish (a vla-eval timeout, an Inspect sample whose status is
``error``) has no score. Harnesses disagree on what that means for a success rate: vla-eval
counts it as a failure (its merged results' ``overall_success_rate``, its export's
``mean_success`` and its reproduction tables divide by every episode); Inspect leaves it out (``inspect_ai``'s metrics score only
the samples without an error); so does the hylo EvalLog (a ``Score`` of ``None`` abstains,
"excluded from the mean"). One switch names the choice everywhere: ``errors="failure"``
or ``"exclude"`` in Python, ``--errors`` on the CLI, the ``errors`` column of every output.
Its default is each run's harness's own convention (:func:`default_errors`), so a run's
headline rate is the number its harness printed.

Under ``"failure"`` an errored abstention of a 0/1 metric is a valid 0 (it joins ``n_valid``
and stays counted in ``n_errors``); a metric that is not 0/1 (``steps``) has no value for an
errored episode under either policy, and the output counts it in ``n_errors`` and its skip
breakdown. A metric is 0/1 when the registry declares it binary, or declares nothing and every
valid value of the group (of the run, in a comparison) is 0 or 1: the rule of the interval's
kind, so the fill and the interval agree.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Literal

import polars as pl

from hylo_analytics.errors import InputError

__all__ = [
    "ERRORS", "FAILURE_FORMATS", "SUCCESS_FALLBACK", "Errors", "check_errors", "default_errors",
    "policy_column", "success_fallback_sql",
]  # fmt: skip

Errors = Literal["failure", "exclude"]
ERRORS: tuple[str, ...] = ("failure", "exclude")
# the source formats (runs.source_format) whose harness counts an errored episode as a failure;
# every other format's convention is to leave it out
FAILURE_FORMATS: tuple[str, ...] = ("vla-eval", "vla-eval/aggregate")
# The metric a harness names its success by when a run records no ``success``, by the prefix
# of runs.source_format: inspect-robots' per-trial outcome is ``success_at_end`` (the
# operator's end-of-episode judgement). The success marts read it (``int_success_metric``,
# through the macro ``success_fallback``), so a new harness's convention is one entry here.
SUCCESS_FALLBACK: Mapping[str, str] = {"inspect-robots/": "success_at_end"}


def default_errors(source_format: str | None) -> Errors:
    """The errors convention of the harness that wrote a run of ``source_format``."""
    return "failure" if source_format in FAILURE_FORMATS else "exclude"


def check_errors(errors: str | None, where: str = "errors") -> Errors | None:
    """``errors`` checked: ``failure``, ``exclude`` or None (each run's harness convention)."""
    if errors is None or errors in ERRORS:
        return errors  # type: ignore[return-value]
    near = difflib.get_close_matches(str(errors), ERRORS, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise InputError(
        f"{where}={errors!r} is not an errors policy{hint} (one of 'failure', 'exclude', "
        "or None for each run's harness convention)"
    )


def errors_sql(errors_policy: str, source_format: str) -> str:
    """SQL of a run's errors convention (the macro ``run_errors``' body): its stored
    ``errors_policy`` (set at ingest; an exported run keeps its harness's), else
    :func:`default_errors` of its ``source_format`` (a store written before that column)."""
    formats = ", ".join("'" + f.replace("'", "''") + "'" for f in FAILURE_FORMATS)
    derived = f"CASE WHEN {source_format} IN ({formats}) THEN 'failure' ELSE 'exclude' END"
    return f"coalesce({errors_policy}, {derived})"


def success_fallback_sql(source_format: str) -> str:
    """SQL of the metric a run of ``source_format`` names its success by when it records no
    ``success`` (the macro ``success_fallback``' body): null for a format without one."""
    whens = " ".join(
        f"WHEN substr({source_format}, 1, {len(prefix)}) = {_literal(prefix)} "
        f"THEN {_literal(metric)}"
        for prefix, metric in SUCCESS_FALLBACK.items()
    )
    return f"CASE {whens} END" if whens else "CAST(NULL AS VARCHAR)"


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def policy_column(columns: Sequence[str], errors: Errors | None) -> pl.Expr:
    """Each row's errors policy as a polars expression: ``errors`` when given, else the row's
    ``_policy`` (a store's rows, from their runs), else its run's ``errors_policy``, else its
    ``source_format``'s convention, else hylo's own (``exclude``: a None score abstains)."""
    if errors is not None:
        return pl.lit(errors, pl.String)
    if "_policy" in columns:
        return pl.col("_policy").cast(pl.String)
    if "errors_policy" in columns:
        derived = policy_column([c for c in columns if c != "errors_policy"], None)
        return pl.coalesce(pl.col("errors_policy").cast(pl.String), derived)
    if "source_format" in columns:
        failing = pl.col("source_format").is_in(list(FAILURE_FORMATS)).fill_null(False)
        return pl.when(failing).then(pl.lit("failure")).otherwise(pl.lit("exclude"))
    return pl.lit("exclude", pl.String)
