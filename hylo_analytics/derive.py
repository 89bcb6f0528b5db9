"""Per-run derivation: token cost from usage and a pricing table, as one vectorized join.

Where usage comes from (the convention shared with the Inspect ingest):

* token counts are **score rows** with metric names ``llm.tokens.input``, ``llm.tokens.output``,
  ``llm.tokens.cache_read``, ``llm.tokens.cache_write`` (one per sample; key null for a
  run-level count). When several sources carry the same count, score precedence picks one
  (score > derived > observation > imported, newest batch first). A count may instead sit in
  the sample's ``extra`` JSON under the same flat key.
* the model and provider are **strings in JSON**: ``llm.model.name`` and ``llm.provider`` as flat
  keys (``{"llm.model.name": "gpt-4o"}``) or nested (``{"llm": {"model": {"name": ...}}}``) in
  ``samples.extra``, falling back to ``runs.extra`` for a run-wide model. No schema change.

A wide polars frame with those columns works too, and every name can be remapped with
:class:`TokenCostInputs`.

Costs are never invented: an unknown model, missing usage, a missing rate or an ambiguous alias
gives a diagnostic row and a null cost. Input and output counts are required; cache counts are
optional (absent = none reported = 0 tokens). The pricing table's sha256 travels with every
derived value. Tier rule: graduated (see :mod:`hylo_analytics.pricing`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics.pricing import PricingTable, load_pricing, resolve_models
from hylo_analytics.store import Store, Tombstone

__all__ = [
    "DIAGNOSTICS",
    "DerivedMetricOutput",
    "TokenCostInputs",
    "TokenCostResult",
    "commit_scores",
    "token_cost",
    "usage_from_store",
]

SOURCE = "derive:token_cost"
KEY_COLS: tuple[str, ...] = ("run_id", "key", "task_id", "seed", "epoch", "episode_id")
# Priority order: the first one a row has becomes its skip_reason.
DIAGNOSTICS: tuple[str, ...] = ("unknown_model", "ambiguous_alias", "missing_usage", "missing_rate")
_REQUIRED_KINDS = ("input", "output")
_PRECEDENCE = "case source_kind when 'score' then 0 when 'derived' then 1 when 'observation' then 2 when 'imported' then 3 else 4 end"


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


@dataclass(frozen=True)
class DerivedMetricOutput:
    """What the derived metric is: its name in the scores table and its semantics."""

    name: str = "request_cost"
    semantic_type: str = "money.cost"
    unit: str = "usd"
    direction: str = "minimize"
    role: str = "constraint"


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
    data: pl.DataFrame | Store,
    pricing: PricingTable | str | Path | Mapping[str, Any],
    *,
    inputs: TokenCostInputs | None = None,
    output: DerivedMetricOutput | None = None,
    runs: Sequence[str] | None = None,
) -> TokenCostResult:
    """Compute the token cost of every row of ``data`` (a wide frame, or a store's samples)."""
    inputs = inputs or TokenCostInputs()
    output = output or DerivedMetricOutput()
    table = pricing if isinstance(pricing, PricingTable) else load_pricing(pricing)
    wide = usage_from_store(data, inputs, runs=runs) if isinstance(data, Store) else data
    costs, diags = _cost(wide, table, inputs)
    return TokenCostResult(costs, diags, table.sha256, output)


def usage_from_store(
    store: Store, inputs: TokenCostInputs | None = None, *, runs: Sequence[str] | None = None
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
    query = f"""
    with samples as (
        select run_id, key, task_id, seed, epoch, episode_id, extra from stg_samples {run_filter}
    ),
    runs as (select run_id, extra from stg_runs {run_filter}),
    picked as (
        select run_id, key, epoch, metric, value
        from stg_scores
        where metric in ($m_input, $m_output, $m_cache_read, $m_cache_write)
        {"and list_contains($runs, run_id)" if runs is not None else ""}
        qualify row_number() over (
            partition by run_id, key, epoch, metric order by {_PRECEDENCE}, batch_seq desc
        ) = 1
    ),
    usage as (
        select run_id, key, epoch, {pivot} from picked group by run_id, key, epoch
    ),
    joined as (
        select
            coalesce(s.run_id, u.run_id) as run_id,
            coalesce(s.key, u.key) as key,
            s.task_id, s.seed,
            coalesce(s.epoch, u.epoch) as epoch,
            s.episode_id, s.extra, {", ".join(f"u.u_{k}" for k in kinds)}
        from samples as s
        full outer join usage as u
            on s.run_id = u.run_id
            and s.key is not distinct from u.key
            and s.epoch is not distinct from u.epoch
    ),
    final as (
        select s.run_id, s.key, s.task_id, s.seed, s.epoch, s.episode_id,
            {tokens},
            {strings}
        from joined as s
        left join runs as r on r.run_id = s.run_id
    )
    select * from final order by run_id, key, epoch
    """
    return store.sql(query, params)


def commit_scores(store: Store, scores: pa.Table) -> int:
    """Commit score rows, superseding each (run, source) they cover; returns the batch seq.

    Re-deriving replaces the earlier derived rows of the same runs, so there are no duplicates.
    """
    pairs = pl.from_arrow(scores.select(["run_id", "source"]))
    assert isinstance(pairs, pl.DataFrame)
    stones = [Tombstone("scores", r, s) for r, s in pairs.unique().sort("run_id").rows()]
    with store.lock():
        return store.commit({"scores": scores}, tombstones=stones)


# -- the computation ---------------------------------------------------------------------


def _cost(
    wide: pl.DataFrame, pricing: PricingTable, inputs: TokenCostInputs
) -> tuple[pl.DataFrame, pl.DataFrame]:
    kinds = inputs.token_columns()
    keys = [c for c in KEY_COLS if c in wide.columns]
    frame = wide.lazy().with_row_index("_row")
    obs = frame.select(
        "_row",
        model=_str_col(wide, inputs.model),
        provider=_str_col(wide, inputs.provider),
    )
    resolved = resolve_models(obs, pricing)
    usage = pl.concat(
        [
            frame.select("_row", kind=pl.lit(k), tokens=_num_col(wide, c), column=pl.lit(c))
            for k, c in kinds.items()
        ]
    ).join(resolved.select("_row", "model_id"), on="_row", how="left")
    per_kind = _price_usage(usage, pricing)
    diags = _diagnostics(resolved, per_kind, inputs)
    first = diags.group_by("_row").agg(
        diagnostic=pl.col("diagnostic").sort_by("_prio").first(),
        detail=pl.col("detail").sort_by("_prio").str.join("; "),
    )
    kind_costs = (
        per_kind.collect()
        .pivot(on="kind", index="_row", values="kind_cost", aggregate_function="first")
        .rename({k: f"cost_{k}" for k in kinds})
    )
    token_cols = [pl.col(c).alias(c) for c in kinds.values() if c in wide.columns]
    costs = (
        frame.select("_row", *keys, *token_cols)
        .join(resolved.select("_row", "model", "provider", "model_id"), on="_row", how="left")
        .join(kind_costs.lazy(), on="_row", how="left")
        .join(first, on="_row", how="left")
        .with_columns(
            cost=pl.when(pl.col("diagnostic").is_null()).then(
                pl.sum_horizontal([pl.col(f"cost_{k}").fill_null(0.0) for k in kinds])
            )
        )
        .sort("_row")
        .drop("_row")
        .collect()
    )
    diag_rows = (
        diags.join(frame.select("_row", *keys), on="_row", how="left")
        .sort("_row", "_prio")
        .select(*keys, "diagnostic", "detail")
        .collect()
    )
    return costs, diag_rows


def _price_usage(usage: pl.LazyFrame, pricing: PricingTable) -> pl.LazyFrame:
    """Per (row, kind): graduated cost over the tiers, and whether a rate covers the tokens."""
    tiers = usage.join(pricing.rates.lazy(), on=["model_id", "kind"], how="left")
    width = pl.col("up_to_tokens") - pl.col("from_tokens")
    in_tier = (pl.col("tokens") - pl.col("from_tokens")).clip(lower_bound=0)
    in_tier = (
        pl.when(pl.col("up_to_tokens").is_null())
        .then(in_tier)
        .otherwise(pl.min_horizontal(in_tier, width))
    )
    return (
        tiers.with_columns(part=in_tier * pl.col("price_per_million") / 1_000_000)
        .group_by("_row", "kind")
        .agg(
            tokens=pl.col("tokens").first(),
            column=pl.col("column").first(),
            model_id=pl.col("model_id").first(),
            n_rates=pl.col("price_per_million").count(),
            open_ended=pl.col("up_to_tokens").is_null().any()
            & pl.col("price_per_million").is_not_null().any(),
            max_up_to=pl.col("up_to_tokens").max(),
            priced=pl.col("part").sum(),
        )
        .with_columns(
            covered=(pl.col("tokens").fill_null(0) <= 0)
            | pl.col("open_ended")
            | (pl.col("tokens") <= pl.col("max_up_to")).fill_null(False),
        )
        .with_columns(
            kind_cost=pl.when(pl.col("tokens").fill_null(0) <= 0)
            .then(pl.lit(0.0))
            .when(pl.col("covered"))
            .then(pl.col("priced"))
        )
    )


def _diagnostics(
    resolved: pl.LazyFrame, per_kind: pl.LazyFrame, inputs: TokenCostInputs
) -> pl.LazyFrame:
    prio = {d: i for i, d in enumerate(DIAGNOSTICS)}
    model = (
        resolved.filter(pl.col("resolution") != "resolved")
        .with_columns(
            diagnostic=pl.when(pl.col("resolution") == "missing_model")
            .then(pl.lit("unknown_model"))
            .otherwise(pl.col("resolution")),
            detail=pl.when(pl.col("resolution") == "missing_model")
            .then(pl.lit(f"no model name in {inputs.model}"))
            .when(pl.col("resolution") == "ambiguous_alias")
            .then(
                pl.format(
                    "model {} (provider {}) matches more than one priced model",
                    "model",
                    _or_none("provider"),
                )
            )
            .otherwise(
                pl.format(
                    "model {} (provider {}) is not in the pricing table",
                    "model",
                    _or_none("provider"),
                )
            ),
        )
        .select("_row", "diagnostic", "detail")
    )
    required = pl.col("kind").is_in(list(_REQUIRED_KINDS))
    usage = per_kind.filter(
        required & (pl.col("tokens").is_null() | (pl.col("tokens") < 0))
    ).select(
        "_row",
        diagnostic=pl.lit("missing_usage"),
        detail=pl.when(pl.col("tokens").is_null())
        .then(pl.format("no {} value", "column"))
        .otherwise(pl.format("{} is negative ({})", "column", _int("tokens"))),
    )
    rate = per_kind.filter(pl.col("model_id").is_not_null() & ~pl.col("covered")).select(
        "_row",
        diagnostic=pl.lit("missing_rate"),
        detail=pl.when(pl.col("n_rates") == 0)
        .then(pl.format("{} has no {} price for {} tokens", "model_id", "kind", _int("tokens")))
        .otherwise(
            pl.format(
                "{} {} tokens exceed the last {} tier (up to {})",
                _int("tokens"),
                "kind",
                "kind",
                "max_up_to",
            )
        ),
    )
    return pl.concat([model, usage, rate]).with_columns(
        _prio=pl.col("diagnostic").replace_strict(prio, return_dtype=pl.Int8)
    )


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
