"""Options and output helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import polars as pl

from hylo_analytics.api import Store, open_store

__all__ = ["FORMATS", "add_format_args", "add_store_arg", "emit", "store_from"]

FORMATS = ("table", "csv", "json", "parquet")


def add_store_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--store",
        required=True,
        metavar="DIR",
        type=Path,
        help="the store folder (created if it does not exist)",
    )


def add_format_args(parser: argparse.ArgumentParser, *, parquet: bool = True) -> None:
    choices = FORMATS if parquet else FORMATS[:3]
    parser.add_argument(
        "--format", choices=choices, default="table", help="output format (default: table)"
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", type=Path, help="write to FILE instead of standard output"
    )


def store_from(args: argparse.Namespace) -> Store:
    return open_store(args.store)


def emit(df: pl.DataFrame, fmt: str, output: Path | None) -> None:
    """Print or write ``df`` in ``fmt``; parquet needs an output file."""
    if fmt == "parquet":
        if output is None:
            raise ValueError("--format parquet needs -o FILE")
        df.write_parquet(output)
        return
    if fmt == "csv":
        text = df.write_csv()
    elif fmt == "json":
        text = df.write_json()
    else:
        # wide enough that long run ids and task names are truncated, not wrapped per character
        width = max(shutil.get_terminal_size((240, 40)).columns, 240)
        with pl.Config(
            tbl_rows=200,
            tbl_cols=30,
            fmt_str_lengths=32,
            tbl_width_chars=width,
            tbl_hide_dataframe_shape=True,
            tbl_hide_column_data_types=True,
            float_precision=4,
        ):
            text = str(df) + "\n"
    if output is None:
        sys.stdout.write(text)
    else:
        output.write_text(text)
