"""``hylo-analytics compare``: candidate runs against a parent run, paired on the key."""

from __future__ import annotations

import argparse
from typing import Any

from hylo_analytics.cli._common import (
    ALL_ROWS_HINT,
    add_format_args,
    add_interval_args,
    add_store_arg,
    add_verdict_args,
    check_directions,
    emit,
    say,
    store_from,
    table_rows,
    table_text,
    verdict_options,
)
from hylo_analytics.errors import InputError

HELP = """Compare candidate runs with a parent run, key by key ("<task_id>#<seed>"), overall and
per --by group. Pairs where either side abstained are dropped and counted per side, with
their reasons and the range the difference would span had they counted. Each row carries
n_pairs, candidate_wins, parent_wins, ties, the mean difference with its CI (Tango's score
interval for 0/1 metrics, the percentile bootstrap of the paired differences otherwise; the
method is in ci_method), the one-sided p that the candidate is better (p_value) and worse
(p_worse) of the test that interval inverts (Tango's score test; the bootstrap test of the
mean from the same resamples; named in the test column), Holm / BH adjusted within the row's
family (the overall row is its own family; the per-task rows of one candidate and metric
another), the exact McNemar p (p_mcnemar; the sign test for numeric metrics), a Wilcoxon p,
and a verdict with the p that decided it (p_verdict) and why
(verdict_note): improved / regressed when the test in the metric's direction rejects at
--alpha and the verdict's interval (ci_adj_low / ci_adj_high: the 1-2*alpha interval,
Bonferroni-adjusted over the row's family, at ci_adj_level) agrees; unchanged when the
1-2*alpha CI lies inside +-margin (needs --margin); otherwise inconclusive. Errored episodes
follow --errors (default: each run's harness convention; the errors column names it). Runs whose benchmark digest, split or scorer version differ are refused unless
--force is given; forced rows say so in the 'forced' and 'gate_note' columns.

Runs: --parent names one run (an id, a unique id prefix, or a selector matching one run;
one matching several is refused, naming them); a --candidate selector names every run it
matches but the parent (agent=octo-ft against version=1.0.0: the agent's other runs, one row
each, in natural version order: 2.3.0 before 2.294.0). A table on the terminal shows the first
and last 100 of more than 200 rows, says how many it hides, and lists the first 20 notes of
dropped pairs; --all prints every row, -o FILE and --format csv / json write them all.

--flips lists the keys behind the wins and losses instead, grouped by candidate, metric and
task: regressions (success -> failure) and fixes (failure -> success) of 0/1 metrics, and
the keys that got worse / better in the metric's direction otherwise, largest first, each
with its epochs, episode ids, the Inspect sample id and the runs' source files (Store.flips;
paired exactly as the comparison pairs them, so a task's flips are its wins and losses); on
the terminal the first 50 (candidate, metric, task) groups are printed (--all: every one).
With --pooled, --candidate and --parent are selectors of one run per suite each (e.g.
agent=xvla and agent=pi05): the runs are paired by suite (benchmark, split) and by key, and
one pooled row is added beside the suite rows: the suite-weighted paired difference (--weights
suite: each suite 1/S, as papers average suites; episodes: n_s/N), the stratified sign-flip
test of it (test_method: exact or Monte Carlo), the MOVER interval over the suites' Tango
intervals (0/1 metrics; the stratified paired bootstrap otherwise), adjusted with the suite
rows as one family (Holm). p_pooled_mcnemar (summed discordant pairs) is shown for reference:
it weighs suites by their discordant pairs, not by 1/S.

--cluster task_id: the keys of one task are one cluster (the seeds of a task are not
independent when the population is tasks): every row's interval and test are then the CR2
cluster-robust ones on Bell-McCaffrey degrees of freedom (ci_method cr2, test 'cr2 t', with
n_clusters, ci_se and ci_df), for 0/1 and numeric metrics alike, and the verdict reads them; a
row of one cluster (a --by task_id row) has no interval and no verdict. With --pooled the
clusters lie within suites and the pooled row is the CR2 of the suite-weighted difference.

example: hylo-analytics compare --store out/store --candidate version=1.2.0-rc1 \
             --parent version=1.0.0 --by task_id --margin 0.05
         hylo-analytics compare --store out/store --candidate agent=octo-ft \
             --parent version=1.0.0 --format csv -o every-version.csv
         hylo-analytics compare --store out/store --pooled --candidate agent=xvla \
             --parent agent=pi05"""

_TABLE_COLUMNS = (
    "candidate",
    "metric",
    "level",
    "direction",
    "n_pairs",
    "candidate_wins",
    "parent_wins",
    "ties",
    "n_dropped",
    "errors",
    "test",
    "p_verdict",
    "mean_diff",
    "ci_adj_level",
    "ci_adj_low",
    "ci_adj_high",
    "verdict",
    "verdict_note",
    "forced",
)
# the table shows the p and the interval the verdict was decided on (issue 40); --wide adds
# the unadjusted ones, csv / json / parquet hold every column
_WIDE_COLUMNS = ("p_value", "p_worse", "p_holm", "ci_low", "ci_high")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="paired comparison of candidate runs against a parent run",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store_arg(p)
    p.add_argument(
        "--candidate",
        action="append",
        required=True,
        metavar="RUN",
        help="candidate runs: an id, a unique id prefix, or a selector such as "
        "agent=xvla,benchmark=libero_spatial (fields: run, agent, version, benchmark, split, "
        "format), which names every run it matches but the parent; repeat for more",
    )
    p.add_argument(
        "--parent",
        required=True,
        metavar="RUN",
        help="the one run to compare against (an id, prefix or selector matching one run; "
        "with --pooled, one run per suite)",
    )
    p.add_argument(
        "--metric",
        action="append",
        metavar="NAME",
        help="metric to compare (repeat; default: success)",
    )
    p.add_argument(
        "--by",
        action="append",
        default=[],
        metavar="COLUMN",
        help="also compare per group of this score column, e.g. task_id",
    )
    p.add_argument(
        "--source",
        default=None,
        help="use only scores of this source (default: the preferred score per key: re-scored > derived > graded > imported)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="compare even when benchmark digest, split or scorer version differ",
    )
    p.add_argument(
        "--reducer",
        choices=("mean", "max", "min", "none"),
        default="mean",
        help="how several epochs of one key are reduced before pairing (default mean, as "
        "Store.compare; none: refuse keys with several epochs)",
    )
    p.add_argument(
        "--pair-on-epoch",
        action="store_true",
        help="pair on (key, epoch) instead of reducing the epochs of a key",
    )
    p.add_argument("--two-sided", action="store_true", help="two-sided p-values")
    p.add_argument(
        "--mid-p", action="store_true", help="mid-p exact McNemar (p_mcnemar; less conservative)"
    )
    p.add_argument(
        "--ci",
        choices=(
            "auto",
            "score",
            "newcombe",
            "percentile",
            "bca",
            "studentized",
            "normal",
            "cr2",
            "none",
            "bootstrap",
        ),
        default="auto",
        help="CI of the mean difference (default auto: Tango score interval for 0/1 metrics, "
        "seeded percentile bootstrap of the paired differences otherwise, CR2 with --cluster; "
        "normal = Wald; bootstrap: the deprecated name of percentile)",
    )
    p.add_argument(
        "--cluster",
        metavar="COLUMN",
        default=None,
        help="a score column whose values cluster the keys (task_id): cluster-robust (CR2) "
        "intervals, tests and verdicts (see above)",
    )
    p.add_argument(
        "--flips",
        action="store_true",
        help="list the keys that flipped (regressions and fixes, worse and better), grouped "
        "by task, with their links, instead of the comparison",
    )
    p.add_argument(
        "--pooled",
        action="store_true",
        help="one policy against another over suites: --candidate and --parent each select "
        "one run per suite (agent=xvla); adds the pooled row (see above)",
    )
    p.add_argument(
        "--weights",
        choices=("suite", "episodes"),
        default="suite",
        help="with --pooled: each suite's weight in the pooled difference, 1/S (suite, the "
        "default: the papers' average) or n_s/N (episodes)",
    )
    add_interval_args(p, what="CI")
    add_verdict_args(p)
    add_format_args(p, parquet=False)
    p.set_defaults(func=run)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :meth:`Store.compare` the flags say (every option of Python
    has a flag with its default: tests/cli/test_cli_parity.py)."""
    return {
        "metrics": tuple(args.metric) if args.metric else ("success",),
        "by": tuple(args.by),
        "source": args.source,
        "force": args.force,
        "reducer": None if args.reducer == "none" else args.reducer,
        "pair_on_epoch": args.pair_on_epoch,
        "alternative": "two-sided" if args.two_sided else "greater",
        "mid_p": args.mid_p,
        "ci": args.ci,
        "n_resamples": args.resamples,
        "level": args.level,
        "seed": args.seed,
        "cluster": args.cluster,
        **verdict_options(args),
    }


_POOLED_COLUMNS = (
    "metric",
    "level",
    "suite",
    "weight",
    "n_pairs",
    "candidate_wins",
    "parent_wins",
    "errors",
    "mean_diff",
    "ci_adj_level",
    "ci_adj_low",
    "ci_adj_high",
    "p_verdict",
    "verdict",
    "test_method",
    "ci_method",
    "p_pooled_mcnemar",
)


def pooled_options(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of :meth:`Store.pooled_compare` the flags say; the options a
    pooled comparison fixes are refused rather than ignored."""
    if len(args.candidate) != 1:
        raise InputError("--pooled takes one --candidate selector (e.g. agent=xvla)")
    fixed = {
        "--by": bool(args.by),
        "--ci": args.ci != "auto",
        "--family": args.family != "comparison",
        "--pair-on-epoch": args.pair_on_epoch,
    }
    bad = [flag for flag, given in fixed.items() if given]
    if bad:
        raise InputError(
            f"--pooled fixes {', '.join(bad)}: the suites are the groups, the pooled interval "
            "combines the suites' Tango intervals, and suite and pooled rows are one family; "
            "drop them, or drop --pooled"
        )
    opts = options(args)
    for key in ("by", "ci", "family", "pair_on_epoch"):
        del opts[key]
    return {**opts, "weights": args.weights}


def _run_pooled(args: argparse.Namespace) -> int:
    store = store_from(args)
    opts = pooled_options(args)
    check_directions(opts["directions"], list(opts["metrics"]))
    result = store.pooled_compare(args.candidate[0], args.parent, **opts)
    if args.format != "table":
        emit(result, args.format, args.output, wide=args.wide)
        return 0
    clustered = ("n_clusters", "ci_df") if args.cluster else ()
    emit(result.select(*_POOLED_COLUMNS, *clustered), "table", args.output, wide=args.wide)
    notes = [
        opts["rule"].describe(),
        "pooled: the suite-weighted paired difference; p_pooled_mcnemar weighs suites by "
        "their discordant pairs (not the printed difference's test; shown for reference)",
    ]
    # issue 40: the suites' and the pooled verdicts that rest on harness errors, said
    import polars as pl

    for r in result.filter(pl.col("errors_note").is_not_null()).iter_rows(named=True):
        where = "pooled" if r["level"] == "pooled" else f"suite {r['suite']}"
        notes.append(f"{where} ({r['metric']}): {r['errors_note']}")
    text = "".join(f"* {n}\n" for n in notes)
    if args.output is None:
        say(text, end="")
    else:
        with args.output.open("a") as fh:
            fh.write(text)
    return 0


def run(args: argparse.Namespace) -> int:
    import polars as pl

    if args.pooled and args.flips:
        raise InputError("--flips lists one comparison's keys: give it without --pooled")
    if args.pooled:
        return _run_pooled(args)
    store = store_from(args)
    opts = options(args)
    check_directions(opts["directions"], list(opts["metrics"]))
    if args.flips:
        return _flips(store, args, opts)
    result = store.compare(args.candidate, args.parent, **opts)
    if args.format != "table":
        emit(result, args.format, args.output, wide=args.wide)
        return 0
    wide = _WIDE_COLUMNS if args.wide else ()
    clustered = ("n_clusters", "ci_df") if args.cluster else ()
    emit(
        result.select(*_TABLE_COLUMNS[:3], *args.by, *_TABLE_COLUMNS[3:], *clustered, *wide),
        "table",
        args.output,
        wide=args.wide,
    )
    # one line per overall row with a note: its dropped pairs, and (issue 40) whether its
    # verdict rests on harness errors
    noted = result.filter(
        pl.col("level") == "overall",
        pl.col("drop_note").is_not_null() | pl.col("errors_note").is_not_null(),
    )
    shown = noted.height if table_rows(args.output) is None else min(noted.height, _NOTES)
    notes = [opts["rule"].describe()]
    for r in noted.head(shown).iter_rows(named=True):
        parts = []
        if r["drop_note"]:
            parts.append(r["drop_note"] + (f" [{r['drop_reasons']}]" if r["drop_reasons"] else ""))
        if r["errors_note"]:
            parts.append(r["errors_note"])
        notes.append(f"{r['candidate']} ({r['metric']}): " + "; ".join(parts))
    if shown < noted.height:
        notes.append(
            f"{noted.height - shown:,} more overall rows dropped pairs or hold errored keys "
            f"(their drop_note, drop_reasons and errors_note columns): {ALL_ROWS_HINT}"
        )
    text = "".join(f"* {n}\n" for n in notes)
    _append(text, args)
    return 0


_NOTES = 20  # drop notes printed under a table on the terminal (--all, -o FILE: every one)
_GROUPS = 50  # --flips: the (candidate, metric, task) groups printed on the terminal

# the options of Store.compare that Store.flips takes too (the rest are statistics)
_FLIP_OPTIONS = ("metrics", "source", "force", "reducer", "pair_on_epoch", "directions", "errors")
_FLIP_COLUMNS = (
    "key",
    "change",
    "errored_side",
    "candidate_value",
    "parent_value",
    "candidate_status",
    "parent_status",
    "diff",
    "epochs",
    "sample_id",
    "candidate_episode_ids",
    "parent_episode_ids",
)


def _append(text: str, args: argparse.Namespace) -> None:
    if args.output is None:
        say(text, end="")
    else:
        with args.output.open("a") as fh:
            fh.write(text)


def _flips(store: Any, args: argparse.Namespace, opts: dict[str, Any]) -> int:
    """``--flips``: Store.flips, as a frame (csv, json) or grouped by task (table)."""
    import polars as pl

    flips = store.flips(args.candidate, args.parent, **{k: opts[k] for k in _FLIP_OPTIONS})
    if args.format != "table":
        emit(flips, args.format, args.output, wide=args.wide)
        return 0
    if flips.is_empty():
        _append("no key flipped: every pair tied or was dropped\n", args)
        return 0
    if args.output is not None:
        args.output.write_text("")
    rows_shown = table_rows(args.output)
    names = flips.select("candidate", "metric", "task_id").unique(maintain_order=True)
    if rows_shown is not None and names.height > _GROUPS:  # on the terminal: the first groups
        shown = flips.join(names.head(_GROUPS), on=["candidate", "metric", "task_id"], how="semi")
    else:
        shown = flips
    groups = shown.group_by("candidate", "metric", "task_id", maintain_order=True)
    for (cand, metric, task), rows in groups:  # laying out a few groups, not computing
        counts = rows["change"].value_counts(sort=True).rows()
        first = rows.row(0, named=True)
        errored = int(rows["errored_side"].is_not_null().sum())
        said = (
            f" ({errored} of them where a side errored: harness errors, not the policy's)"
            if errored
            else ""
        )
        head = (
            f"\n{cand} vs {first['parent']}, {metric}, task {task} "
            f"(errors: {first['errors']}): "
            + ", ".join(f"{n} {c}" for c, n in counts)
            + said
            + f"\n  files: candidate {first['candidate_path']}; parent {first['parent_path']}\n"
        )
        _append(head, args)
        table = table_text(rows.select(_FLIP_COLUMNS), wide=args.wide, rows=rows_shown)
        _append(table, args)
    if shown is not flips:
        _append(
            f"\n* {names.height - _GROUPS:,} more (candidate, metric, task) groups of "
            f"{flips.height - shown.height:,} flipped keys hidden: {ALL_ROWS_HINT}\n",
            args,
        )
    total = flips.group_by("change").len().sort("change").rows()
    _append("* " + ", ".join(f"{n} {c}" for c, n in total) + " in all\n", args)
    errored = flips.filter(pl.col("errored_side").is_not_null())
    if errored.height:
        by_change = errored.group_by("change").len().sort("change").rows()
        _append(
            "* of which a side errored (a harness error, counted as a failure under errors="
            f"'{errored['errors'][0]}'; --errors exclude drops them): "
            + ", ".join(f"{n} {c}" for c, n in by_change)
            + "\n",
            args,
        )
    return 0
