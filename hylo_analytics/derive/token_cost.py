"""Per-run derivation: token cost from usage and a pricing table, as one vectorized join.

Where usage comes from (the convention shared with the Inspect ingest):

* token counts are **score rows** with metric names ``llm.tokens.input``, ``llm.tokens.output``,
  ``llm.tokens.cache_read``, ``llm.tokens.cache_write`` (one per sample; key null for a
  run-level count). When several sources carry the same count, the one score resolution
  (:mod:`hylo_analytics.resolution`) picks one. A count may instead sit in
  the sample's ``extra`` JSON under the same flat key.
* the model and provider are **strings in JSON**: ``llm.model.name`` and ``llm.provider`` as flat
  keys (``{"llm.model.name": "gpt-4o"}``) or nested (``{"llm": {"model": {"name": ...}}}``) in
  ``samples.extra``, falling back to ``runs.extra`` for a run-wide model. No schema change.

A wide polars frame with those columns works too, and every name can be remapped with
:class:`TokenCostInputs`.

Costs are never invented: an unknown model, missing usage, a missing rate or an ambiguous alias
gives a diagnostic row and a null cost. Input and output counts are required; cache counts are
optional (absent = none reported = 0 tokens). The pricing table's sha256 travels with every
derived value. Tier rule: graduated, or whole_request where a price kind declares it (see
:mod:`hylo_analytics.derive.pricing`); both are columns of the same one join.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

import polars as pl
import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics._sql import query_sql
from hylo_analytics.contracts import DerivedMetricOutput
from hylo_analytics.derive.pricing import RATE_KINDS, PricingTable, load_pricing, resolve_models
from hylo_analytics.resolution import preferred_query
from hylo_analytics.store import ParquetStore

__all__ = [
    "DIAGNOSTICS",
    "TOKEN_COST_OUTPUT",
    "TokenCostInputs",
    "TokenCostResult",
    "token_cost",
    "usage_from_store",
]

SOURCE = "derive:token_cost"
KEY_COLS: tuple[str, ...] = ("run_id", "key", "task_id", "seed", "epoch", "episode_id")
# Priority order: the first one a row has becomes its skip_reason.
DIAGNOSTICS: tuple[str, ...] = ("unknown_model", "ambiguous_alias", "missing_usage", "missing_rate")
_REQUIRED_KINDS = ("input", "output")
# The frame is in memory already; polars 2's default streaming engine measured ~5x slower
# here (wide joins with maintain_order), so the in-memory engine is asked for explicitly.
ENGINE: Final = "in-memory"


@dataclass(frozen=True)
class TokenCostInputs:
    """Names of the usage columns / metrics the deriver reads (remap to read other names)."""

    input_tokens: str = "llm.tokens.input"
    output_tokens: str = "llm.tokens.output"
    cache_read_tokens: str = "llm.tokens.cache_read"
    cache_write_tokens: str = "llm.tokens.cache_write"
    provider: str = "llm.provider"
    model: str = "llm.model.name"

    def token_columns(self) -> dict[str, str]:
        """Rate kind -> input column."""
        return {
            "input": self.input_tokens,
            "output": self.output_tokens,
            "cache_read": self.cache_read_tokens,
            "cache_write": self.cache_write_tokens,
        }


TOKEN_COST_OUTPUT: Final = DerivedMetricOutput(
    name="request_cost",
    semantic_type="money.cost",
    unit="usd",
    direction="minimize",
    role="constraint",
)


@dataclass(frozen=True, eq=False)
class TokenCostResult:
    """Costs (one row per observation, null where a diagnostic applies) and the diagnostics."""

    costs: pl.DataFrame
    diagnostics: pl.DataFrame
    pricing_sha256: str
    output: DerivedMetricOutput

    def run_totals(self) -> pl.DataFrame:
        """Per run: total cost, null when any row's cost is unknown (never summed as 0)."""
        return (
            self.costs.group_by("run_id", maintain_order=True)
            .agg(
                n=pl.len(),
                n_costed=pl.col("cost").is_not_null().sum(),
                cost_known=pl.col("cost").sum(),
            )
            .with_columns(
                n_missing=pl.col("n") - pl.col("n_costed"),
                cost_total=pl.when(pl.col("n") == pl.col("n_costed")).then(pl.col("cost_known")),
            )
        )

    def to_scores(self) -> pa.Table:
        """Score rows (``source = derive:token_cost``, ``source_kind = derived``)."""
        meta = [pl.lit(v).alias(k) for k, v in asdict(self.output).items() if k != "name"]
        df = self.costs.with_columns(
            metric=pl.lit(self.output.name),
            value=pl.col("cost"),
            valid=pl.col("diagnostic").is_null(),
            skip_reason=pl.col("diagnostic"),
            explanation=pl.col("detail"),
            source=pl.lit(SOURCE),
            source_kind=pl.lit("derived"),
            scorer_version=pl.lit("token_cost/1"),
            metadata=pl.struct(
                pl.lit(self.pricing_sha256).alias("pricing_sha256"),
                "model_id",
                "diagnostic",
                "detail",
                "cost_input",
                "cost_output",
                "cost_cache_read",
                "cost_cache_write",
                *meta,
            ).struct.json_encode(),
        )
        cols = [c for c in _schema.SCORES.names if c in df.columns]
        return _schema.conform(df.select(cols).to_arrow(), "scores")

    def __repr__(self) -> str:
        n_diag = self.diagnostics.height
        counts = self.diagnostics.group_by("diagnostic").len().sort("diagnostic").rows()
        by = ", ".join(f"{d}={n}" for d, n in counts) or "none"
        return (
            f"TokenCostResult({self.output.name!r}: {self.costs.height} rows, "
            f"{self.costs['cost'].is_not_null().sum()} costed, {n_diag} diagnostics ({by}), "
            f"pricing sha256 {self.pricing_sha256[:12]}...)"
        )

    def _repr_html_(self) -> str:
        return f"<p>{self!r}</p>" + self.costs.head(20)._repr_html_()


def token_cost(
    data: pl.DataFrame | ParquetStore,
    pricing: PricingTable | str | Path | Mapping[str, Any],
    *,
    inputs: TokenCostInputs | None = None,
    output: DerivedMetricOutput | None = None,
    runs: Sequence[str] | None = None,
) -> TokenCostResult:
    """Compute the token cost of every row of ``data`` (a wide frame, or a store's samples)."""
    from hylo_analytics.store import unwrap_store

    data = unwrap_store(data)  # a Store (the facade) holds its ParquetStore
    inputs = inputs or TokenCostInputs()
    output = output or TOKEN_COST_OUTPUT
    table = pricing if isinstance(pricing, PricingTable) else load_pricing(pricing)
    wide = usage_from_store(data, inputs, runs=runs) if isinstance(data, ParquetStore) else data
    costs, diags = _cost(wide, table, inputs)
    return TokenCostResult(costs, diags, table.sha256, output)


def usage_from_store(
    store: ParquetStore, inputs: TokenCostInputs | None = None, *, runs: Sequence[str] | None = None
) -> pl.DataFrame:
    """The usage of every stored sample as one wide frame (long score rows pivoted in DuckDB)."""
    inputs = inputs or TokenCostInputs()
    kinds = inputs.token_columns()
    params: dict[str, Any] = {f"m_{k}": col for k, col in kinds.items()}
    pivot = ",\n".join(f"max(case when metric = $m_{k} then value end) as u_{k}" for k in kinds)
    tokens = ",\n".join(
        f"coalesce(s.u_{k}, try_cast(json_extract_string(s.extra, $x_{k}) as double)) as {_q(c)}"
        for k, c in kinds.items()
    )
    params |= {f"x_{k}": _flat(c) for k, c in kinds.items()}
    params["metrics"] = list(kinds.values())
    strings = ",\n".join(
        f"coalesce(json_extract_string(s.extra, $f_{n}), json_extract_string(s.extra, $n_{n}), "
        f"json_extract_string(r.extra, $f_{n}), json_extract_string(r.extra, $n_{n})) as {_q(col)}"
        for n, col in (("model", inputs.model), ("provider", inputs.provider))
    )
    params |= {
        f"f_{n}": _flat(c) for n, c in (("model", inputs.model), ("provider", inputs.provider))
    }
    params |= {
        f"n_{n}": _nested(c) for n, c in (("model", inputs.model), ("provider", inputs.provider))
    }
    run_filter = ""
    if runs is not None:
        params["runs"] = list(runs)
        run_filter = "where list_contains($runs, run_id)"
    query = query_sql(
        "token_cost_inputs",
        run_filter=run_filter,
        preferred=preferred_query(runs=runs is not None, metrics=True),
        pivot=pivot,
        usage=", ".join(f"u.u_{k}" for k in kinds),
        tokens=tokens,
        strings=strings,
    )
    return store.sql(query, params)


# -- the computation ---------------------------------------------------------------------
# Wide form: one row per observation throughout. The handful of distinct (model, provider)
# pairs is resolved once; each model's tiers become columns joined on model_id, and a kind's
# graduated cost is a sum over its (few) tier columns. No row explosion, no per-row Python.


def _cost(
    wide: pl.DataFrame, pricing: PricingTable, inputs: TokenCostInputs
) -> tuple[pl.DataFrame, pl.DataFrame]:
    kinds = inputs.token_columns()
    keys = [c for c in KEY_COLS if c in wide.columns]
    token_cols = [c for c in kinds.values() if c in wide.columns]
    base = wide.lazy().select(
        *keys,
        *token_cols,
        model=_str_col(wide, inputs.model),
        provider=_str_col(wide, inputs.provider),
        **{f"_t_{k}": _num_col(wide, c) for k, c in kinds.items()},
    )
    # materialized: `unique` has no stable order, and resolution reads the pairs several times
    pairs = (
        base.select("model", "provider")
        .unique(maintain_order=True)
        .with_row_index("_row")
        .collect(engine=ENGINE)
        .lazy()
    )
    tiers, n_tiers = _tier_columns(pricing)
    # the few distinct pairs get their model's tier columns before meeting the big frame
    lookup = (
        resolve_models(pairs, pricing)
        .drop("_row")
        .join(tiers.lazy(), on="model_id", how="left")
        .collect(engine=ENGINE)  # a few rows
        .with_columns(_join_keys())
        .drop("model", "provider")
        .lazy()
    )
    flags = _flag_exprs(inputs, n_tiers)
    flag_cols = [f"_f{i}" for i in range(len(flags))]
    detail_inputs = [
        c
        for k in kinds
        for c in (f"_t_{k}", f"_uncovered_{k}", f"{k}_cap", f"{k}_priced")
        if k in n_tiers or not c.startswith(k)
    ]
    frame = (
        base.with_row_index("_row")
        .with_columns(_join_keys())
        .join(lookup, on=_JOIN_KEYS, how="left", maintain_order="left")
        .with_columns(_kind_exprs(kinds, n_tiers))
        .with_columns(
            [cond.alias(name) for name, (_, cond, _) in zip(flag_cols, flags, strict=True)]
        )
        .with_columns(
            diagnostic=pl.coalesce(
                [
                    pl.when(pl.col(f)).then(pl.lit(name))
                    for f, (name, _, _) in zip(flag_cols, flags, strict=True)
                ]
            )
        )
        .with_columns(
            cost=pl.when(pl.col("diagnostic").is_null()).then(
                pl.sum_horizontal([pl.col(f"cost_{k}") for k in kinds])
            )
        )
        .select(
            "_row",
            *keys,
            *token_cols,
            "model",
            "provider",
            "model_id",
            "resolution",
            *[f"cost_{k}" for k in kinds],
            "diagnostic",
            "cost",
            *flag_cols,
            *detail_inputs,
        )
        .collect(engine=ENGINE)
    )
    diags = _diagnostic_rows(frame, flags, flag_cols, keys)
    details = diags.group_by("_row").agg(detail=pl.col("detail").str.join("; "))
    costs = frame.join(details, on="_row", how="left", maintain_order="left").select(
        *keys,
        *token_cols,
        "model",
        "provider",
        "model_id",
        *[f"cost_{k}" for k in kinds],
        "diagnostic",
        "detail",
        "cost",
    )
    return costs, diags.select(*keys, "diagnostic", "detail")


def _tier_columns(pricing: PricingTable) -> tuple[pl.DataFrame, dict[str, int]]:
    """One row per model: ``{kind}_from{t}``, ``_upto{t}``, ``_price{t}``, ``_cap``, ``_open``."""
    rates = pricing.rates
    counts = dict(rates.group_by("kind").agg(pl.col("tier_index").max() + 1).rows())
    n_tiers = {k: int(counts[k]) for k in RATE_KINDS if k in counts}
    out = pricing.models.select("model_id")
    for kind, n in n_tiers.items():
        sub = rates.filter(pl.col("kind") == kind)
        summary = sub.group_by("model_id").agg(
            pl.col("up_to_tokens").max().alias(f"{kind}_cap"),
            pl.col("up_to_tokens").is_null().any().alias(f"{kind}_open"),
            pl.lit(True).alias(f"{kind}_priced"),
            (pl.col("tier_rule") == "whole_request").any().alias(f"{kind}_whole"),
            (pl.col("tier_basis") == "prompt").any().alias(f"{kind}_by_prompt"),
        )
        out = out.join(summary, on="model_id", how="left")
        for t in range(n):
            tier = sub.filter(pl.col("tier_index") == t).select(
                "model_id",
                pl.col("from_tokens").alias(f"{kind}_from{t}"),
                pl.col("up_to_tokens").alias(f"{kind}_upto{t}"),
                pl.col("price_per_million").alias(f"{kind}_price{t}"),
            )
            out = out.join(tier, on="model_id", how="left")
    return out, n_tiers


def _kind_exprs(kinds: Mapping[str, str], n_tiers: Mapping[str, int]) -> list[pl.Expr]:
    """Per kind: ``cost_{kind}`` (null when no rate covers the tokens) and ``_uncovered_{kind}``."""
    exprs = []
    # the request's prompt: what picks a tier declared with tier_basis: prompt
    prompt = pl.sum_horizontal(
        pl.col(f"_t_{k}").fill_null(0) for k in ("input", "cache_read", "cache_write") if k in kinds
    )
    for kind in kinds:
        tokens = pl.col(f"_t_{kind}")
        none = tokens.fill_null(0) <= 0
        if kind not in n_tiers:
            exprs += [
                pl.when(none).then(pl.lit(0.0)).alias(f"cost_{kind}"),
                (~none & pl.col("model_id").is_not_null()).alias(f"_uncovered_{kind}"),
            ]
            continue
        parts, whole = [], []
        basis = pl.when(pl.col(f"{kind}_by_prompt").fill_null(False)).then(prompt).otherwise(tokens)
        for t in range(n_tiers[kind]):
            lo, hi = pl.col(f"{kind}_from{t}"), pl.col(f"{kind}_upto{t}")
            price = pl.col(f"{kind}_price{t}")
            top = pl.when(hi.is_null()).then(tokens).otherwise(pl.min_horizontal(tokens, hi))
            in_tier = (top - lo).clip(lower_bound=0)
            parts.append((in_tier * price).fill_null(0.0))
            # whole_request: the one tier whose (from, up_to] holds the basis prices all of it
            falls_in = (basis > lo) & (hi.is_null() | (basis <= hi))
            whole.append(pl.when(falls_in).then(tokens * price).fill_null(0.0))
        rule_cost = (
            pl.when(pl.col(f"{kind}_whole").fill_null(False))
            .then(pl.sum_horizontal(whole))
            .otherwise(pl.sum_horizontal(parts))
        )
        covered = (pl.col(f"{kind}_open") | (basis <= pl.col(f"{kind}_cap"))).fill_null(
            False
        ) & pl.col(f"{kind}_priced").fill_null(False)
        exprs += [
            pl.when(none)
            .then(pl.lit(0.0))
            .when(covered)
            .then(rule_cost / 1_000_000)
            .alias(f"cost_{kind}"),
            (~none & ~covered & pl.col("model_id").is_not_null()).alias(f"_uncovered_{kind}"),
        ]
    return exprs


def _flag_exprs(
    inputs: TokenCostInputs, n_tiers: Mapping[str, int]
) -> list[tuple[str, pl.Expr, pl.Expr]]:
    """(diagnostic, condition, detail) in priority order; details are built on flagged rows only."""
    kinds = inputs.token_columns()
    res = pl.col("resolution")
    who = pl.format("model {} (provider {})", _or_none("model"), _or_none("provider"))
    out: list[tuple[str, pl.Expr, pl.Expr]] = [
        (
            "unknown_model",
            res.is_in(["unknown_model", "missing_model"]),
            pl.when(res == "missing_model")
            .then(pl.lit(f"no model name in {inputs.model}"))
            .otherwise(pl.format("{} is not in the pricing table", who)),
        ),
        (
            "ambiguous_alias",
            res == "ambiguous_alias",
            pl.format("{} matches more than one priced model", who),
        ),
    ]
    for kind in _REQUIRED_KINDS:
        tokens, col = pl.col(f"_t_{kind}"), kinds[kind]
        out.append(
            (
                "missing_usage",
                tokens.is_null() | (tokens < 0),
                pl.when(tokens.is_null())
                .then(pl.lit(f"no {col} value"))
                .otherwise(pl.format("{} is negative ({})", pl.lit(col), _int(f"_t_{kind}"))),
            )
        )
    for kind in kinds:
        no_price = pl.format(
            f"{{}} has no {kind} price for {{}} tokens", "model_id", _int(f"_t_{kind}")
        )
        detail = no_price
        if kind in n_tiers:
            over = pl.format(
                f"{{}} {kind} tokens exceed the last {kind} tier (up to {{}})",
                _int(f"_t_{kind}"),
                f"{kind}_cap",
            )
            detail = (
                pl.when(pl.col(f"{kind}_priced").fill_null(False)).then(over).otherwise(no_price)
            )
        out.append(("missing_rate", pl.col(f"_uncovered_{kind}"), detail))
    return out


def _diagnostic_rows(
    frame: pl.DataFrame,
    flags: Sequence[tuple[str, pl.Expr, pl.Expr]],
    flag_cols: Sequence[str],
    keys: Sequence[str],
) -> pl.DataFrame:
    """One row per (observation, diagnostic), in priority order within an observation."""
    parts = [
        frame.lazy()
        .filter(pl.col(col))
        .select("_row", *keys, diagnostic=pl.lit(name), detail=detail, _prio=pl.lit(i, pl.Int16))
        for i, (col, (name, _, detail)) in enumerate(zip(flag_cols, flags, strict=True))
    ]
    return pl.concat(parts).sort("_row", "_prio").collect(engine=ENGINE)


_JOIN_KEYS = ["_model_key", "_provider_key"]


def _join_keys() -> list[pl.Expr]:
    # A sentinel for null keys: a plain hash join is several times faster than nulls_equal.
    return [
        pl.col("model").fill_null("\x00").alias("_model_key"),
        pl.col("provider").fill_null("\x00").alias("_provider_key"),
    ]


def _int(col: str) -> pl.Expr:
    return pl.col(col).round(0).cast(pl.Int64)


def _or_none(col: str) -> pl.Expr:
    return pl.col(col).fill_null("none")


def _str_col(wide: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name).cast(pl.String) if name in wide.columns else pl.lit(None, pl.String)


def _num_col(wide: pl.DataFrame, name: str) -> pl.Expr:
    return pl.col(name).cast(pl.Float64) if name in wide.columns else pl.lit(None, pl.Float64)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _flat(key: str) -> str:
    return "$." + json.dumps(key)


def _nested(key: str) -> str:
    return "$." + ".".join(json.dumps(part) for part in key.split("."))
