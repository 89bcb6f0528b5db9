"""Price importers: llm-prices / genai-prices / static files into a pricing file with provenance."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import hylo_analytics as ha
from hylo_analytics import ConfigError, load_pricing
from hylo_analytics.derive.price_import import (
    GenAIPricesSource,
    LLMPricesSource,
    StaticPriceSource,
    import_prices,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)

# simonw/llm-prices data/<vendor>.json, exactly that shape
LLM_PRICES: dict[str, Any] = {
    "vendor": "openai",
    "models": [
        {
            "id": "gpt-4o",
            "name": "GPT-4o",
            "price_history": [
                {
                    "input": 5,
                    "output": 15,
                    "from_date": None,
                    "to_date": "2024-08-06",
                    "input_cached": None,
                },
                {
                    "input": 2.5,
                    "output": 10,
                    "from_date": "2024-08-06",
                    "to_date": None,
                    "input_cached": 1.25,
                },
            ],
        },
        {
            "id": "o1-pro",
            "name": "o1 Pro",
            "price_history": [
                {
                    "input": 150,
                    "output": 600,
                    "from_date": None,
                    "to_date": None,
                    "input_cached": None,
                }
            ],
        },
        {  # two current prices: ambiguous, reported
            "id": "twice",
            "name": "Twice",
            "price_history": [
                {"input": 1, "output": 2, "from_date": None, "to_date": None, "input_cached": None},
                {"input": 3, "output": 4, "from_date": None, "to_date": None, "input_cached": None},
            ],
        },
        {  # retired: no current price, reported
            "id": "text-davinci-003",
            "name": "GPT-3 Text Davinci 003",
            "price_history": [
                {
                    "input": 20,
                    "output": 20,
                    "from_date": None,
                    "to_date": "2024-01-04",
                    "input_cached": None,
                }
            ],
        },
    ],
}

# pydantic/genai-prices data.json: a list of providers, tiered prices as {base, tiers}
GENAI_PRICES: list[dict[str, Any]] = [
    {
        "id": "google",
        "name": "Google",
        "api_pattern": "https://(.*\\.)?googleapis\\.com",
        "models": [
            {
                "id": "gemini-1.5-pro",
                "name": "gemini 1.5 Pro",
                "match": {"contains": "gemini-1.5-pro"},
                "prices": {
                    "input_mtok": {"base": 1.25, "tiers": [{"start": 128000, "price": 2.5}]},
                    "output_mtok": {"base": 5.0, "tiers": [{"start": 128000, "price": 10.0}]},
                },
            },
            {
                "id": "gemini-2.5-flash",
                "name": "Gemini 2.5 Flash",
                "match": {"or": [{"equals": "gemini-2.5-flash"}, {"equals": "gemini-flash-25"}]},
                "prices": {
                    "input_mtok": 0.3,
                    "input_audio_mtok": 1,
                    "cache_read_mtok": 0.075,
                    "output_mtok": 2.5,
                },
            },
            {
                "id": "dated",
                "match": {"equals": "dated"},
                "prices": [
                    {"constraint": {"start_date": "2025-01-01"}, "prices": {"input_mtok": 1}},
                    {"prices": {"input_mtok": 2, "output_mtok": 3}},
                ],
            },
        ],
    }
]


def _write(tmp_path: Path, name: str, doc: Any) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc, indent=2))
    return path


def _problems(result: Any) -> dict[str, str]:
    return {f"{p.entry}|{p.field}": p.error for p in result.problems}


def test_llm_prices_current_price_imported_and_recorded(tmp_path: Path) -> None:
    src = _write(tmp_path, "openai.json", LLM_PRICES)
    result = LLMPricesSource().import_file(src, now=NOW)
    out = result.write(tmp_path / "pricing.yaml")
    table = load_pricing(out)
    prov = table.provenance
    assert prov is not None
    assert prov["source_kind"] == "llm-prices"
    assert prov["sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert prov["imported_at"] == "2026-01-02T03:04:05+00:00"
    assert prov["selected_models"] == ["openai/gpt-4o", "openai/o1-pro"]
    probs = _problems(result)
    assert "ambiguous" in probs["twice|price_history"]
    assert "no current price" in probs["text-davinci-003|price_history"]
    assert len(prov["not_imported"]) == 2
    rates = table.rates.filter(pl.col("model_id") == "openai/gpt-4o").sort("kind")
    assert rates.select("kind", "price_per_million").rows() == [
        ("cache_read", 1.25),
        ("input", 2.5),
        ("output", 10.0),
    ]
    # the written file is what costs read: no source file needed at cost time
    src.unlink()
    frame = pl.DataFrame(
        {
            "run_id": ["r"],
            "key": ["k"],
            "llm.tokens.input": [1_000_000],
            "llm.tokens.output": [1_000_000],
            "llm.model.name": ["openai:gpt-4o"],
        }
    )
    assert ha.token_cost(frame, out).costs["cost"][0] == pytest.approx(12.5)


def test_llm_prices_model_selection_reports_missing(tmp_path: Path) -> None:
    src = _write(tmp_path, "openai.json", LLM_PRICES)
    result = import_prices("llm-prices", src, models=["o1-pro", "gpt-9"], now=NOW)
    assert list(result.pricing["models"]) == ["openai/o1-pro"]
    assert result.provenance["selected_models"] == ["o1-pro", "gpt-9"]
    assert "selected but not in the file" in _problems(result)["gpt-9|model"]


def test_llm_prices_combined_current_file(tmp_path: Path) -> None:
    doc = {
        "updated_at": "2025-01-01",
        "prices": [
            {
                "id": "claude-3.5-haiku",
                "vendor": "anthropic",
                "name": "Claude 3.5 Haiku",
                "input": 0.8,
                "output": 4,
                "input_cached": None,
            },
            {"id": "bad", "vendor": "anthropic", "name": "Bad", "input": -1, "output": 4},
        ],
    }
    result = import_prices("llm-prices", _write(tmp_path, "current-v1.json", doc), now=NOW)
    assert list(result.pricing["models"]) == ["anthropic/claude-3.5-haiku"]
    assert "expected a price >= 0" in _problems(result)["bad|input"]


def test_genai_prices_tiers_are_whole_request(tmp_path: Path) -> None:
    src = _write(tmp_path, "data.json", GENAI_PRICES)
    result = GenAIPricesSource().import_file(src, now=NOW)
    table = result.table()
    assert table.provenance is not None and table.provenance["source_kind"] == "genai-prices"
    pro = table.rates.filter(
        pl.col("model_id") == "google/gemini-1.5-pro", pl.col("kind") == "input"
    )
    cols = ("from_tokens", "up_to_tokens", "price_per_million", "tier_rule", "tier_basis")
    assert pro.select(*cols).rows() == [
        (0, 128000, 1.25, "whole_request", "prompt"),
        (128000, None, 2.5, "whole_request", "prompt"),
    ]
    probs = _problems(result)
    assert "not modelled" in probs["google/gemini-2.5-flash|prices.input_audio_mtok"]
    assert "only exact names" in probs["google/gemini-1.5-pro|match"]
    assert "date/time constraints" in probs["google/dated|prices"]
    aliases = set(table.aliases.filter(pl.col("model_id") == "google/gemini-2.5-flash")["alias"])
    assert {"gemini-2.5-flash", "gemini-flash-25", "google:gemini-flash-25"} <= aliases
    # 128,001 input tokens: every one at 2.5 (whole request), as genai-prices quotes Gemini
    frame = pl.DataFrame(
        {
            "run_id": ["r"],
            "key": ["k"],
            "llm.tokens.input": [128_001],
            "llm.tokens.output": [0],
            "llm.model.name": ["gemini-1.5-pro"],
        }
    )
    assert ha.token_cost(frame, table).costs["cost"][0] == pytest.approx(128_001 * 2.5e-6)
    # the prompt picks the tier of every kind: 1,000 output tokens pay 10.0, not 5.0
    frame = frame.with_columns(pl.lit(1_000).alias("llm.tokens.output"))
    cost = ha.token_cost(frame, table).costs["cost"][0]
    assert cost == pytest.approx(128_001 * 2.5e-6 + 1_000 * 10.0e-6)


def test_genai_prices_provider_yaml_file(tmp_path: Path) -> None:
    src = tmp_path / "google.yml"
    src.write_text(
        "name: Google\nid: google\nmodels:\n  - id: gemma-3-4b-it\n    match:\n"
        "      equals: gemma-3-4b-it\n    prices:\n      input_mtok: 0.02\n      output_mtok: 0.04\n"
    )
    result = import_prices("genai-prices", src, now=NOW)
    assert result.pricing["models"]["google/gemma-3-4b-it"]["output"] == {
        "unit": "mtok",
        "price_per_million_tokens": 0.04,
    }
    assert result.problems == ()


def test_static_source_validates_and_stamps(tmp_path: Path) -> None:
    src = tmp_path / "mine.yaml"
    src.write_text(
        "pricing:\n  provider: acme\n  models:\n    m1:\n      input: {price_per_million_tokens: 1}\n"
        "      output: {price_per_million_tokens: 2}\n"
    )
    result = StaticPriceSource().import_file(src, now=NOW)
    table = result.table()
    assert table.models.rows() == [("m1", "acme")]
    assert table.provenance is not None and table.provenance["source_kind"] == "static"
    src.write_text("pricing:\n  models:\n    m1:\n      input: {price_per_million_tokens: -1}\n")
    with pytest.raises(ConfigError) as exc:
        StaticPriceSource().import_file(src)
    assert exc.value.path == "pricing.models['m1'].input.price_per_million_tokens"


def test_nothing_importable_is_an_error_naming_the_file(tmp_path: Path) -> None:
    doc = {"vendor": "x", "models": [LLM_PRICES["models"][3]]}
    src = _write(tmp_path, "old.json", doc)
    with pytest.raises(ConfigError, match="no model imported") as exc:
        import_prices("llm-prices", src)
    assert exc.value.path == str(src)
    with pytest.raises(ConfigError, match="expected one of"):
        import_prices("litellm", src)
    with pytest.raises(ConfigError, match="expected llm-prices JSON"):
        import_prices("llm-prices", _write(tmp_path, "list.json", GENAI_PRICES))


def test_shared_bare_alias_is_reported(tmp_path: Path) -> None:
    doc = [
        {
            "id": p,
            "models": [
                {"id": "m", "match": {"equals": "m"}, "prices": {"input_mtok": 1, "output_mtok": 2}}
            ],
        }
        for p in ("azure", "openai")
    ]
    result = import_prices("genai-prices", _write(tmp_path, "d.json", doc), now=NOW)
    assert "claimed by ['azure/m', 'openai/m']" in _problems(result)["m|aliases"]
