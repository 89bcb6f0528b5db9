"""Token cost deriver: graduated tiers at both edges, every diagnostic, the store round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pytest

import hylo_analytics as ha
from hylo_analytics._schema import SCORES
from hylo_analytics.derive import TokenCostInputs, TokenCostResult
from hylo_analytics.derive.token_cost import usage_from_store
from hylo_analytics.store import commit_scores

# input: flat 1.0; output: graduated 4.0 up to 100k, then 6.0 open-ended;
# cache_read flat 0.1; "bounded" has a closed last tier (up to 1000 at 2.0, then up to 3000 at 1.0).
PRICING: dict[str, Any] = {
    "pricing": {
        "version": 1,
        "models": {
            "openai/gpt-demo": {
                "aliases": ["openai:gpt-demo", "gpt-demo", "dup"],
                "input": {"price_per_million_tokens": 1.0},
                "output": {
                    "tiers": [
                        {"up_to_tokens": 100_000, "price_per_million_tokens": 4.0},
                        {"price_per_million_tokens": 6.0},
                    ]
                },
                "cache_read": {"price_per_million_tokens": 0.1},
            },
            "acme/bounded": {
                "aliases": ["dup"],
                "input": {
                    "tiers": [
                        {"up_to_tokens": 1000, "price_per_million_tokens": 2.0},
                        {"up_to_tokens": 3000, "price_per_million_tokens": 1.0},
                    ]
                },
                "output": {"price_per_million_tokens": 1.0},
            },
        },
    }
}


def _frame(rows: list[tuple[Any, ...]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows,
        schema={
            "run_id": pl.String,
            "key": pl.String,
            "llm.tokens.input": pl.Int64,
            "llm.tokens.output": pl.Int64,
            "llm.model.name": pl.String,
            "llm.provider": pl.String,
        },
        orient="row",
    )


def _cost(model: str, inp: int | None, out: int | None) -> TokenCostResult:
    return ha.token_cost(_frame([("r", "k", inp, out, model, None)]), PRICING)


@pytest.mark.parametrize(
    ("output_tokens", "expected"),
    [
        (0, 0.0),
        (1, 4.0e-6),
        (100_000, 0.4),  # exactly at up_to_tokens: all in tier 0
        (100_001, 0.4 + 6.0e-6),  # one above: that one token at tier 1's rate
        (250_000, 0.4 + 150_000 * 6.0e-6),
    ],
)
def test_graduated_output_tiers(output_tokens: int, expected: float) -> None:
    r = _cost("gpt-demo", 0, output_tokens)
    assert r.costs["cost"][0] == pytest.approx(expected, rel=1e-12)
    assert r.diagnostics.height == 0


@pytest.mark.parametrize(
    ("input_tokens", "expected", "diagnostic"),
    [
        (1000, 1000 * 2.0e-6, None),  # at the first bound
        (1001, 1000 * 2.0e-6 + 1.0e-6, None),  # one above
        (3000, 1000 * 2.0e-6 + 2000 * 1.0e-6, None),  # at the last (closed) bound
        (3001, None, "missing_rate"),  # one above the last bound: no rate prices it
    ],
)
def test_bounded_last_tier_edges(
    input_tokens: int, expected: float | None, diagnostic: str | None
) -> None:
    r = _cost("acme/bounded", input_tokens, 0)
    row = r.costs.row(0, named=True)
    assert row["diagnostic"] == diagnostic
    if expected is None:
        assert row["cost"] is None
        assert r.diagnostics["detail"][0] == (
            "3001 input tokens exceed the last input tier (up to 3000)"
        )
    else:
        assert row["cost"] == pytest.approx(expected, rel=1e-12)


def test_flat_rates_and_cache() -> None:
    df = _frame([("r", "k", 2_000_000, 10, "gpt-demo", None)]).with_columns(
        pl.lit(500_000).alias("llm.tokens.cache_read")
    )
    r = ha.token_cost(df, PRICING)
    row = r.costs.row(0, named=True)
    assert row["cost_input"] == pytest.approx(2.0)
    assert row["cost_cache_read"] == pytest.approx(0.05)
    assert row["cost"] == pytest.approx(2.0 + 40e-6 + 0.05)


@pytest.mark.parametrize(
    ("model", "provider", "inp", "out", "diagnostic", "detail"),
    [
        ("gpt-nope", "openai", 1, 1, "unknown_model", "model gpt-nope (provider openai) is not"),
        (None, None, 1, 1, "unknown_model", "no model name in llm.model.name"),
        ("dup", None, 1, 1, "ambiguous_alias", "model dup (provider none) matches more than one"),
        ("gpt-demo", None, None, 1, "missing_usage", "no llm.tokens.input value"),
        ("gpt-demo", None, 1, None, "missing_usage", "no llm.tokens.output value"),
        ("gpt-demo", None, -5, 1, "missing_usage", "llm.tokens.input is negative (-5)"),
        ("acme/bounded", None, 5000, 1, "missing_rate", "5000 input tokens exceed"),
    ],
)
def test_every_diagnostic_gives_a_null_cost(
    model: str | None,
    provider: str | None,
    inp: int | None,
    out: int | None,
    diagnostic: str,
    detail: str,
) -> None:
    r = ha.token_cost(_frame([("r", "k", inp, out, model, provider)]), PRICING)
    row = r.costs.row(0, named=True)
    assert row["cost"] is None  # never an invented zero
    assert row["diagnostic"] == diagnostic
    assert row["detail"].startswith(detail)
    assert r.diagnostics.select("run_id", "key", "diagnostic").row(0) == ("r", "k", diagnostic)


def test_missing_rate_for_a_kind_without_price() -> None:
    df = _frame([("r", "k", 1, 1, "acme/bounded", None)]).with_columns(
        pl.lit(7).alias("llm.tokens.cache_read")
    )
    r = ha.token_cost(df, PRICING)
    assert r.costs["diagnostic"][0] == "missing_rate"
    assert r.costs["detail"][0] == "acme/bounded has no cache_read price for 7 tokens"
    # zero cache tokens need no price
    ok = ha.token_cost(df.with_columns(pl.lit(0).alias("llm.tokens.cache_read")), PRICING)
    assert ok.costs["cost"][0] == pytest.approx(2e-6 + 1e-6)


def test_several_diagnostics_on_one_row_are_all_listed() -> None:
    r = ha.token_cost(_frame([("r", "k", None, None, "nope", None)]), PRICING)
    assert r.costs["diagnostic"][0] == "unknown_model"  # the first by priority
    assert r.diagnostics["diagnostic"].to_list() == [
        "unknown_model",
        "missing_usage",
        "missing_usage",
    ]


def test_remapped_inputs_and_output() -> None:
    df = pl.DataFrame(
        {"run_id": ["r"], "key": ["k"], "in": [1_000_000], "out": [0], "m": ["gpt-demo"]}
    )
    inputs = TokenCostInputs(input_tokens="in", output_tokens="out", model="m", provider="p")
    out = ha.DerivedMetricOutput(name="dollars", role="diagnostic")
    r = ha.token_cost(df, PRICING, inputs=inputs, output=out)
    assert r.costs["cost"][0] == pytest.approx(1.0)
    scores = pl.from_arrow(r.to_scores())
    assert isinstance(scores, pl.DataFrame)
    assert scores["metric"][0] == "dollars"
    assert json.loads(scores["metadata"][0])["role"] == "diagnostic"


def test_score_rows_carry_hash_and_diagnostics() -> None:
    df = _frame([("r", "a", 1, 1, "gpt-demo", None), ("r", "b", 1, 1, "nope", None)])
    r = ha.token_cost(df, PRICING)
    table = r.to_scores()
    assert table.schema == SCORES
    s = pl.from_arrow(table)
    assert isinstance(s, pl.DataFrame)
    assert s["source"].unique().to_list() == ["derive:token_cost"]
    assert s["source_kind"].unique().to_list() == ["derived"]
    assert s["valid"].to_list() == [True, False]
    assert s["skip_reason"].to_list() == [None, "unknown_model"]
    meta = [json.loads(m) for m in s["metadata"]]
    assert {m["pricing_sha256"] for m in meta} == {r.pricing_sha256}
    assert meta[0]["semantic_type"] == "money.cost" and meta[0]["unit"] == "usd"
    assert meta[1]["diagnostic"] == "unknown_model"
    totals = r.run_totals().row(0, named=True)
    assert totals["cost_total"] is None  # one unknown cost: the total is unknown, not partial
    assert totals["n_missing"] == 1 and totals["cost_known"] == pytest.approx(5e-6)
    assert "1 costed" in repr(r) and "unknown_model=1" in repr(r)


# -- the store: long score rows pivoted, model from samples.extra / runs.extra ----------------


def _usage_store(root: Path) -> ha.Store:
    store = ha.open_store(root)
    runs = pa.table(
        {
            "run_id": ["r1", "r2"],
            "extra": [None, json.dumps({"llm": {"model": {"name": "acme/bounded"}}})],
        }
    )
    samples = pa.table(
        {
            "run_id": ["r1", "r1", "r1", "r2"],
            "key": ["t#1", "t#2", "t#3", "t#1"],
            "task_id": ["t"] * 4,
            "seed": [1, 2, 3, 1],
            "extra": [
                json.dumps({"llm.model.name": "gpt-demo", "llm.provider": "openai"}),
                json.dumps({"llm.model.name": "gpt-demo", "llm.tokens.output": 100_001}),
                None,  # no model anywhere for r1: unknown_model
                None,  # r2: model from runs.extra (nested form)
            ],
        }
    )
    metric = ["llm.tokens.input", "llm.tokens.output", "llm.tokens.input", "llm.tokens.input"]
    scores = pa.table(
        {
            "run_id": ["r1", "r1", "r1", "r2", "r1"],
            "key": ["t#1", "t#1", "t#2", "t#1", "t#1"],
            "metric": [*metric, "llm.tokens.input"],
            "value": [1_000_000.0, 100_000.0, 10.0, 1000.0, 999.0],
            "source": ["evallog", "evallog", "evallog", "evallog", "stale"],
            # an imported count loses to a score-kind count of the same metric
            "source_kind": ["score", "imported", "imported", "imported", "imported"],
        }
    )
    with store.parquet.lock():
        store.parquet.commit({"runs": runs, "samples": samples, "scores": scores})
    return store


def test_usage_from_store_pivots_long_scores(tmp_path: Path) -> None:
    store = _usage_store(tmp_path / "s")
    wide = usage_from_store(store.parquet)
    assert wide.select("run_id", "key", "llm.tokens.input", "llm.tokens.output").rows() == [
        ("r1", "t#1", 1_000_000.0, 100_000.0),
        ("r1", "t#2", 10.0, 100_001.0),  # output from samples.extra
        ("r1", "t#3", None, None),
        ("r2", "t#1", 1000.0, None),
    ]
    assert wide["llm.model.name"].to_list() == ["gpt-demo", "gpt-demo", None, "acme/bounded"]
    assert wide["llm.provider"].to_list() == ["openai", None, None, None]


def test_token_cost_from_store_and_commit(tmp_path: Path) -> None:
    store = _usage_store(tmp_path / "s")
    r = ha.token_cost(store, PRICING)
    assert r.costs["cost"].to_list()[:2] == pytest.approx([1.0 + 0.4, 10e-6 + 0.4 + 6e-6])
    assert r.costs["diagnostic"].to_list() == [None, None, "unknown_model", "missing_usage"]
    commit_scores(store, r.to_scores())
    commit_scores(store, ha.token_cost(store, PRICING).to_scores())  # re-derive: replaces
    got = store.sql(
        "select run_id, key, value, skip_reason from stg_scores "
        "where source = 'derive:token_cost' order by run_id, key"
    )
    assert got.height == 4
    assert got["skip_reason"].to_list() == [None, None, "unknown_model", "missing_usage"]
    only_r2 = ha.token_cost(store, PRICING, runs=["r2"])
    assert only_r2.costs["run_id"].to_list() == ["r2"]


def test_ingested_robot_runs_get_diagnostics_not_zero_costs(sample_store: ha.Store) -> None:
    # the committed sample has no LLM usage at all: every sample is a diagnostic, none a 0
    r = ha.token_cost(sample_store, PRICING)
    assert r.costs.height == 600
    assert r.costs["cost"].null_count() == 600
    assert set(r.costs["diagnostic"]) == {"unknown_model"}
    assert r.diagnostics.group_by("diagnostic").len().sort("diagnostic").rows() == [
        ("missing_usage", 1200),
        ("unknown_model", 600),
    ]


# whole_request beside graduated: the same tiers (4.0 up to 200k, 8.0 above), two rules.
TIERED: dict[str, Any] = {
    "pricing": {
        "models": {
            f"google/{rule}": {
                "input": {
                    "tier_rule": rule,
                    "tiers": [
                        {"up_to_tokens": 200_000, "price_per_million_tokens": 4.0},
                        {"price_per_million_tokens": 8.0},
                    ],
                },
                "output": {"price_per_million_tokens": 1.0},
            }
            for rule in ("graduated", "whole_request")
        }
    }
}


@pytest.mark.parametrize(
    ("input_tokens", "graduated", "whole"),
    [
        (0, 0.0, 0.0),
        (1, 4.0e-6, 4.0e-6),
        (199_999, 199_999 * 4.0e-6, 199_999 * 4.0e-6),
        (200_000, 0.8, 0.8),  # at the bound: the first tier for both
        (200_001, 0.8 + 8.0e-6, 200_001 * 8.0e-6),  # one above: all of it at 8.0 when whole
        (500_000, 0.8 + 300_000 * 8.0e-6, 4.0),
    ],
)
def test_whole_request_vs_graduated_at_the_tier_bound(
    input_tokens: int, graduated: float, whole: float
) -> None:
    frame = _frame(
        [
            ("r", "g", input_tokens, 0, "google/graduated", None),
            ("r", "w", input_tokens, 0, "google/whole_request", None),
        ]
    )
    r = ha.token_cost(frame, TIERED)
    assert r.diagnostics.height == 0
    costs = dict(zip(r.costs["key"], r.costs["cost"], strict=True))
    assert costs["g"] == pytest.approx(graduated, rel=1e-12, abs=1e-15)
    assert costs["w"] == pytest.approx(whole, rel=1e-12, abs=1e-15)


def test_whole_request_bounded_last_tier_is_a_missing_rate() -> None:
    doc = {
        "pricing": {
            "models": {
                "acme/w": {
                    "input": {
                        "tier_rule": "whole_request",
                        "tiers": [
                            {"up_to_tokens": 10, "price_per_million_tokens": 1.0},
                            {"up_to_tokens": 20, "price_per_million_tokens": 2.0},
                        ],
                    },
                    "output": {"price_per_million_tokens": 1.0},
                }
            }
        }
    }
    r = ha.token_cost(
        _frame([("r", "a", 20, 0, "acme/w", None), ("r", "b", 21, 0, "acme/w", None)]), doc
    )
    assert r.costs["cost"].to_list()[0] == pytest.approx(40e-6)
    assert r.costs["diagnostic"].to_list() == [None, "missing_rate"]


def _long_context(basis: str | None) -> dict[str, Any]:
    """Gemini-style: every kind costs double once the prompt is over 200k tokens."""

    def kind(base: float) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "tier_rule": "whole_request",
            "tiers": [
                {"up_to_tokens": 200_000, "price_per_million_tokens": base},
                {"price_per_million_tokens": 2 * base},
            ],
        }
        if basis is not None:
            spec["tier_basis"] = basis
        return spec

    models = {"google/g": {"input": kind(1.0), "output": kind(10.0), "cache_read": kind(0.1)}}
    return {"pricing": {"models": models}}


@pytest.mark.parametrize(
    ("inp", "cached", "out", "by_prompt", "by_own"),
    [
        # prompt 150k + 50k = 200k: at the bound, the short rate for every kind either way
        (150_000, 50_000, 60_000, 0.15 + 0.005 + 0.6, 0.15 + 0.005 + 0.6),
        # prompt 150k + 50,001: over the bound, so output too pays the long rate (its own
        # 60k would not); by its own counts no kind crosses 200k
        (150_000, 50_001, 60_000, 0.3 + 50_001 * 0.2e-6 + 1.2, 0.15 + 50_001 * 0.1e-6 + 0.6),
        (250_000, 0, 1_000, 0.5 + 0.02, 0.5 + 0.01),
    ],
)
def test_tier_basis_prompt_prices_every_kind_by_the_prompt(
    inp: int, cached: int, out: int, by_prompt: float, by_own: float
) -> None:
    frame = _frame([("r", "k", inp, out, "google/g", None)]).with_columns(
        pl.lit(cached).alias("llm.tokens.cache_read")
    )
    prompt = ha.token_cost(frame, _long_context("prompt"))
    own = ha.token_cost(frame, _long_context(None))
    assert prompt.diagnostics.height == own.diagnostics.height == 0
    assert prompt.costs["cost"].item() == pytest.approx(by_prompt, rel=1e-12)
    assert own.costs["cost"].item() == pytest.approx(by_own, rel=1e-12)


def test_tier_basis_is_checked() -> None:
    from hylo_analytics._config import ConfigError
    from hylo_analytics.derive.pricing import parse_pricing

    doc = _long_context("tokens")
    with pytest.raises(
        ConfigError, match=r"input\.tier_basis.*expected one of \['own', 'prompt'\]"
    ):
        parse_pricing(doc, sha256="test")
    doc = _long_context("prompt")
    doc["pricing"]["models"]["google/g"]["input"]["tier_rule"] = "graduated"
    with pytest.raises(ConfigError, match="tier_basis 'prompt' needs tier_rule: whole_request"):
        parse_pricing(doc, sha256="test")
