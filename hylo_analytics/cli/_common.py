"""Options and output helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hylo_analytics._text import (
    FORMULA_START,
    json_printable,
    printable,
    printable_lines,
    spreadsheet_safe,
)
from hylo_analytics.errors import InputError

if TYPE_CHECKING:  # the engine is imported when a command runs, not when parsers are built
    import polars as pl

    from hylo_analytics.api import Store

__all__ = [
    "FORMATS",
    "add_format_args",
    "add_lock_arg",
    "add_store_arg",
    "add_verdict_args",
    "emit",
    "every_row",
    "say",
    "spreadsheet_cells",
    "store_from",
    "table_rows",
    "table_text",
    "verdict_options",
]

FORMATS = ("table", "csv", "json", "parquet")
TEXT_WIDTH = 60
# a table on the terminal longer than this shows its first and last TABLE_ROWS // 2 rows and
# says how many it hides and how to see them (--all, -o FILE, --format csv / json)
TABLE_ROWS = 200
ALL_ROWS_HINT = "--all prints every row; -o FILE, --format csv and --format json write them all"
_EVERY_ROW: ContextVar[bool] = ContextVar("every_row", default=False)
_ID_COLUMNS = {"run", "candidate", "parent", "key", "source", "metric", "path"}


def add_store_arg(parser: argparse.ArgumentParser, *, create: bool = False) -> None:
    """``--store DIR``; only commands that write new runs (``create``) may create a store."""
    parser.add_argument(
        "--store",
        required=True,
        metavar="DIR",
        type=Path,
        help="the store folder" + (" (created if it does not exist)" if create else ""),
    )
    parser.set_defaults(store_create=create)


def add_lock_arg(parser: argparse.ArgumentParser) -> None:
    """``--lock-timeout SECONDS`` on the commands that write to the store."""
    parser.add_argument(
        "--lock-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="when another process is writing to the store, wait at most this long, then fail "
        "(default: HYLO_ANALYTICS_LOCK_TIMEOUT, else wait for as long as it takes)",
    )


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def add_interval_args(parser: argparse.ArgumentParser, *, what: str = "interval") -> None:
    """``--level``, ``--resamples`` and ``--seed``: every command that computes an interval."""
    from hylo_analytics.cli._defaults import DEFAULT_LEVEL, DEFAULT_RESAMPLES

    parser.add_argument(
        "--level", type=float, default=DEFAULT_LEVEL, help=f"{what} coverage (0.95)"
    )
    parser.add_argument(
        "--resamples",
        type=int,
        default=DEFAULT_RESAMPLES,
        help=f"bootstrap resamples (default {DEFAULT_RESAMPLES:,})",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")


def add_format_args(parser: argparse.ArgumentParser, *, parquet: bool = True) -> None:
    choices = FORMATS if parquet else FORMATS[:3]
    parser.add_argument(
        "--format", choices=choices, default="table", help="output format (default: table)"
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", type=Path, help="write to FILE instead of standard output"
    )
    parser.add_argument(
        "--wide",
        action="store_true",
        help=f"tables: show long text in full (default: cut at {TEXT_WIDTH} characters; "
        "ids are never cut)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        dest="all_rows",
        help=f"tables: print every row (default: a table of more than {TABLE_ROWS} rows shows "
        f"its first and last {TABLE_ROWS // 2} and says how many it hides; -o FILE writes "
        "every row)",
    )


def table_rows(output: Path | None) -> int | None:
    """The rows a table shows: :data:`TABLE_ROWS` on the terminal, every row (None) in a
    file or under ``--all``."""
    return None if output is not None or _EVERY_ROW.get() else TABLE_ROWS


@contextmanager
def every_row(on: bool = True) -> Iterator[None]:
    """Tables printed inside print every row (``--all``; :func:`main` sets it per command)."""
    token = _EVERY_ROW.set(on)
    try:
        yield
    finally:
        _EVERY_ROW.reset(token)


def add_verdict_args(parser: argparse.ArgumentParser) -> None:
    """The verdict's options, the same on every command that shows a verdict."""
    g = parser.add_argument_group("verdict")
    g.add_argument(
        "--alpha", type=float, default=0.05, help="significance level of the tests (0.05)"
    )
    g.add_argument(
        "--margin",
        type=float,
        default=None,
        metavar="M",
        help="equivalence margin: 'unchanged' when the 1-2*alpha CI lies inside +-M (points of "
        "success for 0/1 metrics, 0.02 = 2 points; else a fraction of the parent's mean). "
        "Without it nothing is called unchanged",
    )
    g.add_argument(
        "--threshold",
        type=float,
        default=0.0,
        help="an extra condition on improved/regressed: the CI must clear +-threshold "
        "(metric units; default 0)",
    )
    g.add_argument(
        "--direction",
        action="append",
        default=[],
        metavar="METRIC=DIR",
        help="what is better for METRIC: maximize or minimize (repeat). Default: what the "
        "scores declare, then the metric registry; a metric with neither gets two-sided "
        "tests and no improved/regressed",
    )
    g.add_argument(
        "--adjust",
        choices=("holm", "bh", "none"),
        default="holm",
        help="multiple-comparison adjustment of the verdict's p within a family: holm "
        "(default), bh (Benjamini-Hochberg) or none",
    )
    g.add_argument(
        "--relative-noise",
        type=float,
        default=None,
        metavar="FRACTION",
        help="use the relative noise rule instead: improved / regressed need the change to "
        "exceed FRACTION of the parent's mean and the test to reject; unchanged needs the "
        "1-2*alpha CI inside +-FRACTION of the parent's mean (not with --margin / --threshold)",
    )
    g.add_argument(
        "--family",
        choices=("comparison", "level"),
        default="comparison",
        help="multiple-comparison family: each candidate/metric/level (default), or every "
        "row of one level",
    )
    add_errors_arg(g)


def add_errors_arg(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--errors``: the errors policy (``hylo_analytics._harness``), one flag everywhere."""
    p.add_argument(
        "--errors",
        choices=("failure", "exclude"),
        default=None,
        help="what an errored episode (a harness timeout) is for a 0/1 metric: 'failure' "
        "counts it as 0, 'exclude' leaves it out. Default: each run's harness convention "
        "(vla-eval, merged results and export: failure, as its own rates; the others: exclude)",
    )
    p.add_argument(
        "--errors-as-failures",
        dest="errors",
        action="store_const",
        const="failure",
        help=argparse.SUPPRESS,  # deprecated alias of --errors failure
    )


def verdict_options(args: argparse.Namespace) -> dict[str, Any]:
    """``rule``, ``directions``, ``family`` and ``errors`` from the arguments."""
    from hylo_analytics.compare.verdicts import RelativeNoiseRule, Rule, StatisticalRule

    directions: dict[str, str] = {}
    for item in args.direction:
        metric, sep, direction = item.partition("=")
        if not sep or direction not in ("maximize", "minimize") or not metric:
            raise InputError(f"--direction {item!r}: expected METRIC=maximize or METRIC=minimize")
        directions[metric] = direction
    rule: Rule
    if args.relative_noise is not None:
        if args.margin is not None or args.threshold:
            raise InputError(
                "--relative-noise is a rule of its own: drop --margin / --threshold, or drop "
                "--relative-noise to use them"
            )
        rule = RelativeNoiseRule(noise=args.relative_noise, alpha=args.alpha, adjust=args.adjust)
    else:
        rule = StatisticalRule(
            alpha=args.alpha, adjust=args.adjust, margin=args.margin, threshold=args.threshold
        )
    return {
        "rule": rule,
        "directions": directions or None,
        "family": args.family,
        "errors": args.errors,
    }


def check_directions(directions: dict[str, str] | None, metrics: list[str]) -> None:
    """A ``--direction`` for a metric not compared is a typo, never silently unused."""
    from hylo_analytics._text import did_you_mean

    unused = [m for m in directions or {} if m not in metrics]
    if unused:
        raise InputError(
            f"--direction for {', '.join(map(repr, unused))}, which is not compared"
            f"{did_you_mean(unused, metrics)} (the metrics compared: {', '.join(metrics)}; "
            "add it with --metric)"
        )


def store_from(args: argparse.Namespace) -> Store:
    from hylo_analytics.api import open_store

    return open_store(
        args.store,
        create=getattr(args, "store_create", False),
        lock_timeout=getattr(args, "lock_timeout", None),
    )


def say(*parts: object, file: TextIO | None = None, end: str = "\n") -> None:
    """``print`` for the CLI: every line shown with control characters escaped
    (:func:`hylo_analytics._text.printable`), since names and paths come from the logs."""
    text = " ".join(str(p) for p in parts) + end
    (file or sys.stdout).write(printable_lines(text))


def emit(
    df: pl.DataFrame,
    fmt: str,
    output: Path | None,
    *,
    wide: bool = False,
    hint: str = ALL_ROWS_HINT,
) -> None:
    """Print or write ``df`` in ``fmt``; parquet needs an output file.

    Tables never cut an identifier (a run id is what the next command needs); other long text
    is cut at :data:`TEXT_WIDTH` characters unless ``wide``. A table printed to the terminal
    shows at most :data:`TABLE_ROWS` rows (unless ``--all``: :func:`every_row`), then says
    how many it hid and ``hint``, how to see them; one written to ``output`` has every row.
    CSV string cells a spreadsheet would run as a formula get a leading ``'``. What goes to
    the terminal has its control characters escaped: JSON as JSON escapes (the same data),
    CSV and tables as ``\x1b``.
    """
    if fmt == "parquet":
        if output is None:
            raise InputError("--format parquet needs -o FILE")
        df.write_parquet(output)
        return
    df = _binary_as_base64(_categorical_as_text(df))
    if fmt == "csv":
        text = spreadsheet_cells(_json_nested(df)).write_csv()
        text = text if output is not None else printable_lines(text)
    elif fmt == "json":
        text = json_printable(df.write_json())
    else:
        text = table_text(df, wide=wide, rows=table_rows(output), hint=hint)
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)


def _categorical_as_text(df: pl.DataFrame) -> pl.DataFrame:
    """Categorical columns (a ranking's two million pairs name their policies by code) as
    text: every rule for text (escaping, cutting, spreadsheet safety) reads String columns."""
    import polars as pl
    import polars.selectors as cs

    coded = df.select(cs.categorical() | cs.enum()).columns
    return df.with_columns(pl.col(coded).cast(pl.String)) if coded else df


def _binary_as_base64(df: pl.DataFrame) -> pl.DataFrame:
    """Binary columns (``trace_files.data``: compressed bytes) as base64 text: text formats
    cannot hold bytes, and base64 gives them back whole (parquet keeps the bytes)."""
    import polars as pl

    binary = [c for c, t in df.schema.items() if t == pl.Binary]
    return df.with_columns(pl.col(binary).bin.encode("base64")) if binary else df


def spreadsheet_cells(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its string cells and column names made inert for a spreadsheet
    (:func:`hylo_analytics._text.spreadsheet_safe`); numbers are left as they are."""

    starts = "^[" + re.escape("".join(FORMULA_START)) + "]"
    return _map_text(df, starts, spreadsheet_safe)


# a superset of what ``str.isprintable`` refuses (categories C and Z, but the space), so the
# Python rule runs only on cells that may need it
_HIDDEN = r"[\p{C}\p{Z}&&[^ ]]"


def _map_text(df: pl.DataFrame, pattern: str, fix: Callable[[str], str]) -> pl.DataFrame:
    """``df`` with ``fix`` applied to its column names and to the string cells matching
    ``pattern`` (found vectorized; ``fix`` runs on those only)."""
    import polars as pl

    out = []
    for column in df.iter_columns():
        if column.dtype == pl.String:
            at = column.str.contains(pattern).fill_null(False).arg_true()
            if len(at):
                column = column.scatter(at, [fix(v) for v in column.gather(at).to_list()])
        out.append(column.alias(fix(column.name)))
    return pl.DataFrame(out) if out else df


def _json_nested(df: pl.DataFrame) -> pl.DataFrame:
    """``df`` with its list, array and struct columns as JSON text (CSV cells are flat).

    Encoded in one pass per column: each value is wrapped in a one-field struct, encoded, and
    the wrapper's ``{"name":`` and ``}`` cut off. A null stays an empty cell.
    """
    import json

    import polars as pl

    nested = [c for c, t in df.schema.items() if t.is_nested()]
    if not nested:
        return df
    return df.with_columns(
        pl.when(pl.col(c).is_null())
        .then(None)
        .otherwise(pl.struct(c).struct.json_encode().str.strip_prefix("{" + json.dumps(c) + ":"))
        .str.strip_suffix("}")
        .alias(c)
        for c in nested
    )


def is_identifier(column: str) -> bool:
    return column in _ID_COLUMNS or column.endswith("_id")


def table_text(
    df: pl.DataFrame,
    *,
    wide: bool = False,
    rows: int | None = TABLE_ROWS,
    hint: str = ALL_ROWS_HINT,
) -> str:
    """``df`` as a terminal table: ids whole, other text cut at TEXT_WIDTH unless ``wide``.

    Past ``rows`` rows (None, or ``--all``: every row) the table shows its first and last
    ``rows // 2`` around a row of ``…`` and ends with a line saying how many rows it hid,
    then ``hint`` (how to see them all).
    """
    import polars as pl

    if _EVERY_ROW.get():
        rows = None
    shown = df.height if rows is None or df.height <= rows else rows - rows % 2

    df = _map_text(df, _HIDDEN, printable)  # escaped before widths are measured: aligned
    text_cols = [c for c, t in df.schema.items() if t == pl.String and not is_identifier(c)]
    if not wide and text_cols:
        cut = pl.col(text_cols)
        df = df.with_columns(
            pl.when(cut.str.len_chars() > TEXT_WIDTH)
            .then(cut.str.slice(0, TEXT_WIDTH - 1) + "\u2026")
            .otherwise(cut)
            .name.keep()
        )
    longest = max([_longest(df[c]) for c, t in df.schema.items() if t == pl.String], default=0)
    # polars cuts a column's name at the same length as its text: names are shown whole
    longest = max([longest, *(len(c) for c in df.columns)])
    # wide enough that every cell is shown on one line, never wrapped
    need = sum(max(len(c), _longest(df[c])) + 3 for c in df.columns) + 1
    width = max(shutil.get_terminal_size((240, 40)).columns, 240, need)
    with pl.Config(
        tbl_rows=max(shown, 1),
        tbl_cols=-1 if wide else 30,
        fmt_str_lengths=max(longest, 8),
        tbl_width_chars=width,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        float_precision=4,
    ):
        text = printable_lines(str(df)) + "\n"  # names of columns, nested values
    if shown < df.height:
        hidden = df.height - shown
        text += (
            f"* {hidden:,} of {df.height:,} rows hidden (the first and last {shown // 2:,} "
            f"shown): {printable_lines(hint)}\n"
        )
    return text


def _longest(column: pl.Series) -> int:
    """The widest cell of ``column`` as printed (strings by length, others by their text)."""
    import polars as pl

    if column.dtype.is_nested():  # lists and structs: no cast to text, their JSON's length
        column = _json_nested(column.to_frame()).to_series()
    text = column if column.dtype == pl.String else column.cast(pl.String, strict=False)
    n = text.str.len_chars().max() if text.dtype == pl.String else None
    return int(n) if isinstance(n, int) else 12
