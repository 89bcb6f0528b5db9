"""Pricing DSL: normalization, validation errors with key paths, alias resolution."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from hylo_analytics import ConfigError, load_pricing

DOC: dict[str, Any] = {
    "pricing": {
        "version": 1,
        "provider": "openai",
        "models": {
            "openai/gpt-demo": {
                "aliases": ["openai:gpt-demo", "gpt-demo", "shared-slug"],
                "input": {"unit": "mtok", "price_per_million_tokens": 1.0},
                "output": {
                    "unit": "mtok",
                    "tiers": [
                        {"up_to_tokens": 100000, "price_per_million_tokens": 4.0},
                        {"price_per_million_tokens": 6.0},
                    ],
                },
                "cache_read": {"unit": "mtok", "price_per_million_tokens": 0.1},
            },
            "anthropic/claude-demo": {
                "aliases": ["claude-demo", "shared-slug"],
                "input": {"price_per_million_tokens": 3.0},
                "output": {"price_per_million_tokens": 15.0},
            },
        },
    }
}


def test_normalized_tables() -> None:
    t = load_pricing(DOC)
    assert t.models.to_dicts() == [
        {"model_id": "openai/gpt-demo", "provider": "openai"},
        {"model_id": "anthropic/claude-demo", "provider": "anthropic"},
    ]
    out = t.rates.filter(pl.col("model_id") == "openai/gpt-demo", pl.col("kind") == "output")
    assert out.select("tier_index", "from_tokens", "up_to_tokens", "price_per_million").rows() == [
        (0, 0, 100000, 4.0),
        (1, 100000, None, 6.0),
    ]
    assert set(t.aliases.filter(pl.col("alias") == "shared-slug")["model_id"]) == {
        "openai/gpt-demo",
        "anthropic/claude-demo",
    }
    assert set(t.to_arrow()) == {"models", "aliases", "rates"}
    assert "sha256=" in repr(t)


def test_file_hash_is_the_bytes_hash(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(DOC))
    t = load_pricing(f"file://{path}")
    assert t.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert load_pricing("models.yaml", base_dir=tmp_path).sha256 == t.sha256
    # a mapping's hash is stable and differs when a price changes
    changed = {"pricing": {**DOC["pricing"], "version": 2}}
    assert load_pricing(DOC).sha256 == load_pricing(DOC).sha256 != load_pricing(changed).sha256


@pytest.mark.parametrize(
    ("model", "provider", "expected", "resolution"),
    [
        ("openai/gpt-demo", None, "openai/gpt-demo", "resolved"),  # the stable id
        ("openai:gpt-demo", None, "openai/gpt-demo", "resolved"),  # provider:model alias
        ("OpenAI/GPT-Demo", None, "openai/gpt-demo", "resolved"),  # case-insensitive
        ("gpt-demo", None, "openai/gpt-demo", "resolved"),  # bare slug alias
        ("claude-demo", "anthropic", "anthropic/claude-demo", "resolved"),
        ("anthropic:claude-demo", None, "anthropic/claude-demo", "resolved"),  # ':' read as '/'
        ("shared-slug", None, None, "ambiguous_alias"),  # claimed by two models
        ("shared-slug", "anthropic", "anthropic/claude-demo", "resolved"),  # provider breaks tie
        ("shared-slug", "mistral", None, "ambiguous_alias"),
        ("gpt-other", "openai", None, "unknown_model"),
        (None, "openai", None, "missing_model"),
    ],
)
def test_alias_resolution(
    model: str | None, provider: str | None, expected: str | None, resolution: str
) -> None:
    t = load_pricing(DOC)
    out = t.resolve(pl.Series([model], dtype=pl.String), pl.Series([provider], dtype=pl.String))
    assert out.row(0, named=True)["model_id"] == expected
    assert out.row(0, named=True)["resolution"] == resolution


def test_provider_qualifies_a_bare_slug() -> None:
    doc = {"models": {"acme/m1": {"input": {"price_per_million_tokens": 1.0}}}}
    t = load_pricing(doc)
    out = t.resolve(pl.Series(["m1", "m1", "m1"]), pl.Series(["acme", None, "other"]))
    assert out["resolution"].to_list() == ["resolved", "unknown_model", "unknown_model"]


def _with(model: dict[str, Any]) -> dict[str, Any]:
    return {"pricing": {"version": 1, "models": {"m": model}}}


@pytest.mark.parametrize(
    ("doc", "path", "message"),
    [
        ({"pricing": {"models": {}}}, "pricing.models", "at least one model"),
        ({"pricing": {"models": []}}, "pricing.models", "expected a mapping"),
        ({"pricing": {"version": "one", "models": {"m": {}}}}, "pricing.version", "integer"),
        ({"pricing": {"modles": {}}}, "pricing.modles", "unknown key"),
        (_with({}), "pricing.models['m']", "at least one price"),
        (_with({"inptu": {}}), "pricing.models['m'].inptu", "unknown key"),
        (
            _with({"input": {"price_per_million_tokens": "1"}}),
            "pricing.models['m'].input.price_per_million_tokens",
            "expected a number",
        ),
        (
            _with({"input": {"price_per_million_tokens": -1}}),
            "pricing.models['m'].input.price_per_million_tokens",
            ">= 0",
        ),
        (
            _with({"input": {"unit": "ktok", "price_per_million_tokens": 1}}),
            "pricing.models['m'].input.unit",
            "mtok",
        ),
        (_with({"input": {"unit": "mtok"}}), "pricing.models['m'].input", "exactly one of"),
        (
            _with(
                {
                    "output": {
                        "tiers": [
                            {"price_per_million_tokens": 1},
                            {"price_per_million_tokens": 2},
                        ]
                    }
                }
            ),
            "pricing.models['m'].output.tiers[0].up_to_tokens",
            "only the last tier",
        ),
        (
            _with(
                {
                    "output": {
                        "tiers": [
                            {"up_to_tokens": 10, "price_per_million_tokens": 1},
                            {"up_to_tokens": 10, "price_per_million_tokens": 2},
                        ]
                    }
                }
            ),
            "pricing.models['m'].output.tiers[1].up_to_tokens",
            "tiers ascend",
        ),
        (_with({"aliases": [3], "input": {}}), "pricing.models['m'].aliases[0]", "string"),
    ],
)
def test_config_errors_name_the_key_path(doc: dict[str, Any], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_pricing(doc)
    assert info.value.path == path
    assert message in str(info.value)
    assert str(info.value).startswith(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="pricing file not found"):
        load_pricing(tmp_path / "nope.yaml")


def test_tier_rule_is_kept_per_kind_and_checked() -> None:
    doc = {
        "models": {
            "g/m": {
                "input": {
                    "tier_rule": "whole_request",
                    "tiers": [
                        {"up_to_tokens": 200_000, "price_per_million_tokens": 1.25},
                        {"price_per_million_tokens": 2.5},
                    ],
                },
                "output": {"price_per_million_tokens": 10.0},
            }
        }
    }
    t = load_pricing(doc)
    assert dict(t.rates.select("kind", "tier_rule").unique().rows()) == {
        "input": "whole_request",
        "output": "graduated",
    }
    bad = {"models": {"g/m": {"input": {**doc["models"]["g/m"]["input"], "tier_rule": "flat"}}}}
    with pytest.raises(ConfigError) as exc:
        load_pricing(bad)
    assert exc.value.path == "pricing.models['g/m'].input.tier_rule"
    assert "graduated" in exc.value.message
    flat = {"models": {"g/m": {"input": {"tier_rule": "graduated", "price_per_million_tokens": 1}}}}
    with pytest.raises(ConfigError, match="needs 'tiers'"):
        load_pricing(flat)
