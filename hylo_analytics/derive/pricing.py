"""The pricing DSL, normalized into three small tables keyed by stable model id.

A pricing file (Autobench's shape)::

    pricing:
      version: 1
      provider: openai
      models:
        openai/gpt-demo:
          aliases: [openai:gpt-demo, gpt-demo]
          input: {unit: mtok, price_per_million_tokens: 1.0}
          output:
            unit: mtok
            tiers:
              - {up_to_tokens: 100000, price_per_million_tokens: 4.0}
              - {price_per_million_tokens: 6.0}

becomes ``models`` (model_id, provider), ``aliases`` (alias, model_id) and ``rates`` (model_id,
kind, tier_index, from_tokens, up_to_tokens, price_per_million). Cost is then one join on the
resolved model id (see :mod:`hylo_analytics.derive`), never a per-row lookup.

**Tier rule: graduated**, like tax brackets. Tier *i* prices the tokens in
``(from_tokens, up_to_tokens]`` of one request; a request of 100,001 output tokens above pays
100,000 at 4.0 and 1 at 6.0. This is how metered token prices are usually quoted and it keeps
cost continuous in the token count (one token more never costs a whole tier's jump). A last tier
with an ``up_to_tokens`` bound prices nothing above it: such a request gets a ``missing_rate``
diagnostic, not a guess.

**Tier rule: whole_request**, declared per price kind (``tier_rule: whole_request`` beside
``tiers``): every token of the request is priced at the rate of the one tier its count falls in,
as Gemini's "over 200k" prices and genai-prices' tiers are quoted; a request of 100,001 output
tokens above would pay all 100,001 at 6.0. The count that picks the tier is that kind's own count,
or with ``tier_basis: prompt`` the request's prompt (input + cache read + cache write tokens, the
counts being disjoint as Inspect reports them):
providers (Anthropic, Gemini, genai-prices since its threshold fix) price *every* kind of a
request, output included, at the long-context rate once the prompt crosses the bound. ``prompt``
needs ``whole_request``. ``graduated`` is the default, so existing files keep their meaning.

**Aliases** are matched case-insensitively. An observed model name is tried as written, then
with ``provider:`` spelt ``provider/``, then qualified with the observed provider
(``provider/name``, ``provider:name``); the first form that names any alias wins. An alias that
two models claim is *ambiguous*: the observed provider breaks the tie when it names exactly one
of them, otherwise the row gets an ``ambiguous_alias`` diagnostic.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa

from hylo_analytics._config import (
    ConfigError,
    check_keys,
    expect_list,
    expect_mapping,
    expect_number,
    expect_str,
)
from hylo_analytics._lazy import LazyModule
from hylo_analytics.errors import InputNotFoundError

if TYPE_CHECKING:
    import yaml
else:  # imported on first use (a spec or pricing file is read)
    yaml = LazyModule("yaml")

__all__ = [
    "RATE_KINDS",
    "TIER_BASES",
    "TIER_RULES",
    "PricingTable",
    "load_pricing",
    "parse_pricing",
]

RATE_KINDS: tuple[str, ...] = ("input", "output", "cache_read", "cache_write")
_MODEL_KEYS = ("aliases", "provider", *RATE_KINDS)
_UNITS = ("mtok",)

MODELS_SCHEMA = {"model_id": pl.String, "provider": pl.String}
ALIASES_SCHEMA = {"alias": pl.String, "model_id": pl.String}
RATES_SCHEMA = {
    "model_id": pl.String,
    "kind": pl.String,
    "tier_index": pl.Int64,
    "from_tokens": pl.Int64,
    "up_to_tokens": pl.Int64,  # null: open-ended
    "price_per_million": pl.Float64,
    "tier_rule": pl.String,  # graduated | whole_request (one per model and kind)
    "tier_basis": pl.String,  # own | prompt: the count that picks a whole_request tier
}
TIER_RULES: tuple[str, ...] = ("graduated", "whole_request")
# the count that picks a whole_request tier: the kind's own tokens, or the request's prompt
TIER_BASES: tuple[str, ...] = ("own", "prompt")


@dataclass(frozen=True, eq=False)
class PricingTable:
    """A normalized pricing table; ``sha256`` identifies it in every value derived from it."""

    version: int
    provider: str | None
    models: pl.DataFrame
    aliases: pl.DataFrame
    rates: pl.DataFrame
    sha256: str
    source: str | None = field(default=None)
    # where an imported file's prices came from (:mod:`hylo_analytics.derive.price_import`)
    provenance: Mapping[str, Any] | None = field(default=None)

    def to_arrow(self) -> dict[str, pa.Table]:
        """The three tables as Arrow (for DuckDB or for writing next to a report)."""
        return {
            "models": self.models.to_arrow(),
            "aliases": self.aliases.to_arrow(),
            "rates": self.rates.to_arrow(),
        }

    def resolve(self, model: pl.Series, provider: pl.Series | None = None) -> pl.DataFrame:
        """Resolve observed model names (and providers) to model ids.

        Returns one row per input with ``model_id`` (null unless resolved) and ``resolution``
        (``resolved`` | ``unknown_model`` | ``ambiguous_alias`` | ``missing_model``).
        """
        if provider is None:
            provider = pl.Series("provider", [None] * len(model), dtype=pl.String)
        obs = pl.DataFrame(
            {"model": model.cast(pl.String), "provider": provider.cast(pl.String)}
        ).with_row_index("_row")
        return resolve_models(obs.lazy(), self).collect().drop("_row")

    def __repr__(self) -> str:
        return (
            f"PricingTable(version={self.version}, provider={self.provider!r}, "
            f"models={self.models.height}, aliases={self.aliases.height}, "
            f"rates={self.rates.height}, sha256={self.sha256[:12]}...)"
        )

    def _repr_html_(self) -> str:
        head = f"<p><b>PricingTable</b> v{self.version}, sha256 <code>{self.sha256[:16]}</code></p>"
        return head + self.rates._repr_html_()


def load_pricing(
    source: str | Path | Mapping[str, Any], *, base_dir: Path | None = None
) -> PricingTable:
    """Load a pricing table from a YAML file (path or ``file://`` URI) or an already parsed mapping.

    A file's sha256 is that of its bytes (so ``sha256sum models.yaml`` checks it); a mapping's is
    that of its canonical JSON.
    """
    if isinstance(source, Mapping):
        blob = json.dumps(source, sort_keys=True, separators=(",", ":"), default=str).encode()
        return parse_pricing(source, sha256=hashlib.sha256(blob).hexdigest())
    text = str(source)
    path = Path(text.removeprefix("file://"))
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise InputNotFoundError(
            f"pricing file not found: {path}; check the path (a relative one is read from "
            f"{base_dir or Path.cwd()})"
        )
    raw = path.read_bytes()
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(str(path), f"not valid YAML: {exc}") from exc
    return parse_pricing(doc, sha256=hashlib.sha256(raw).hexdigest(), source=str(path))


def parse_pricing(doc: object, *, sha256: str, source: str | None = None) -> PricingTable:
    """Validate and normalize a parsed pricing document (with or without the ``pricing:`` key)."""
    root = "pricing"
    top = expect_mapping(doc, root)
    provenance = None
    if "pricing" in top:
        check_keys(top, ["pricing", "provenance"], "")
        if "provenance" in top:
            provenance = expect_mapping(top["provenance"], "provenance")
        top = expect_mapping(top["pricing"], root)
    check_keys(top, ["version", "provider", "models"], root)
    version = top.get("version", 1)
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigError(f"{root}.version", f"expected an integer, got {version!r}")
    provider = top.get("provider")
    if provider is not None:
        provider = expect_str(provider, f"{root}.provider")
    models = expect_mapping(top.get("models"), f"{root}.models")
    if not models:
        raise ConfigError(f"{root}.models", "expected at least one model")
    model_rows: list[dict[str, Any]] = []
    alias_rows: list[dict[str, Any]] = []
    rate_rows: list[dict[str, Any]] = []
    # A loop over the handful of models in a price list, not over data rows.
    for model_id, spec in models.items():
        path = f"{root}.models[{model_id!r}]"
        spec = expect_mapping(spec, path)
        check_keys(spec, _MODEL_KEYS, path)
        # the model's own provider, else its id's prefix, else the price list's provider
        m_provider = spec.get("provider")
        if m_provider is None:
            m_provider = model_id.split("/", 1)[0] if "/" in model_id else provider
        if m_provider is not None:
            m_provider = expect_str(m_provider, f"{path}.provider")
        model_rows.append({"model_id": model_id, "provider": m_provider})
        names = {_norm(model_id)}
        for i, alias in enumerate(expect_list(spec.get("aliases", []), f"{path}.aliases")):
            names.add(_norm(expect_str(alias, f"{path}.aliases[{i}]")))
        alias_rows += [{"alias": a, "model_id": model_id} for a in sorted(names)]
        kinds = [k for k in RATE_KINDS if k in spec]
        if not kinds:
            raise ConfigError(path, f"expected at least one price among {list(RATE_KINDS)}")
        for kind in kinds:
            rate_rows += _parse_rate(spec[kind], model_id, kind, f"{path}.{kind}")
    return PricingTable(
        version=version,
        provider=provider,
        models=pl.DataFrame(model_rows, schema=MODELS_SCHEMA),
        aliases=pl.DataFrame(alias_rows, schema=ALIASES_SCHEMA),
        rates=pl.DataFrame(rate_rows, schema=RATES_SCHEMA),
        sha256=sha256,
        source=source,
        provenance=provenance,
    )


def _parse_rate(spec: object, model_id: str, kind: str, path: str) -> list[dict[str, Any]]:
    spec = expect_mapping(spec, path)
    check_keys(spec, ["unit", "price_per_million_tokens", "tiers", "tier_rule", "tier_basis"], path)
    unit = spec.get("unit", "mtok")
    if unit not in _UNITS:
        raise ConfigError(f"{path}.unit", f"expected one of {list(_UNITS)}, got {unit!r}")
    if ("tiers" in spec) == ("price_per_million_tokens" in spec):
        raise ConfigError(path, "expected exactly one of 'price_per_million_tokens' or 'tiers'")
    rule = spec.get("tier_rule", "graduated")
    if rule not in TIER_RULES:
        raise ConfigError(f"{path}.tier_rule", f"expected one of {list(TIER_RULES)}, got {rule!r}")
    basis = spec.get("tier_basis", "own")
    if basis not in TIER_BASES:
        raise ConfigError(
            f"{path}.tier_basis", f"expected one of {list(TIER_BASES)}, got {basis!r}"
        )
    if basis == "prompt" and rule != "whole_request":
        raise ConfigError(
            f"{path}.tier_basis", "tier_basis 'prompt' needs tier_rule: whole_request"
        )
    if "price_per_million_tokens" in spec:
        if "tier_rule" in spec or "tier_basis" in spec:
            key = "tier_rule" if "tier_rule" in spec else "tier_basis"
            raise ConfigError(f"{path}.{key}", "a tier rule needs 'tiers' (one flat price)")
        price = expect_number(
            spec["price_per_million_tokens"], f"{path}.price_per_million_tokens", minimum=0
        )
        return [_rate(model_id, kind, 0, 0, None, price)]
    tiers = expect_list(spec["tiers"], f"{path}.tiers")
    if not tiers:
        raise ConfigError(f"{path}.tiers", "expected at least one tier")
    rows = []
    lower = 0
    for i, tier in enumerate(tiers):
        tpath = f"{path}.tiers[{i}]"
        tier = expect_mapping(tier, tpath)
        check_keys(tier, ["up_to_tokens", "price_per_million_tokens"], tpath)
        price = expect_number(
            tier.get("price_per_million_tokens"), f"{tpath}.price_per_million_tokens", minimum=0
        )
        upper = tier.get("up_to_tokens")
        if upper is None and i != len(tiers) - 1:
            raise ConfigError(
                f"{tpath}.up_to_tokens", "expected a bound: only the last tier may be open-ended"
            )
        if upper is not None and (
            isinstance(upper, bool) or not isinstance(upper, int) or upper <= lower
        ):
            raise ConfigError(
                f"{tpath}.up_to_tokens",
                f"expected an integer > {lower} (tiers ascend), got {upper!r}",
            )
        rows.append(_rate(model_id, kind, i, lower, upper, price, rule, basis))
        lower = upper if upper is not None else lower
    return rows


def _rate(
    model_id: str,
    kind: str,
    i: int,
    lower: int,
    upper: int | None,
    price: float,
    rule: str = "graduated",
    basis: str = "own",
) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "kind": kind,
        "tier_index": i,
        "from_tokens": lower,
        "up_to_tokens": upper,
        "price_per_million": price,
        "tier_rule": rule,
        "tier_basis": basis,
    }


def _norm(name: str) -> str:
    return name.strip().lower()


def resolve_models(obs: pl.LazyFrame, pricing: PricingTable) -> pl.LazyFrame:
    """Add ``model_id`` and ``resolution`` to ``obs`` (columns ``_row``, ``model``, ``provider``).

    Vectorized: every observation's candidate spellings are joined to the alias table at once.
    """
    name = pl.col("model").str.strip_chars().str.to_lowercase()
    prov = pl.col("provider").str.strip_chars().str.to_lowercase()
    bare = ~name.str.contains("/", literal=True) & ~name.str.contains(":", literal=True)
    forms = [
        (0, name),
        (1, name.str.replace(":", "/", literal=True, n=1)),
        (2, pl.when(bare).then(pl.concat_str([prov, pl.lit("/"), name]))),
        (3, pl.when(bare).then(pl.concat_str([prov, pl.lit(":"), name]))),
    ]
    cands = pl.concat(
        [obs.select("_row", "provider", alias=f, priority=pl.lit(p, pl.Int8)) for p, f in forms]
    ).drop_nulls("alias")
    models = pricing.models.lazy().rename({"provider": "model_provider"})
    hits = (
        cands.join(pricing.aliases.lazy(), on="alias", how="inner")
        .filter(pl.col("priority") == pl.col("priority").min().over("_row"))
        .join(models, on="model_id", how="left")
        .unique(["_row", "model_id"])
        .with_columns(
            n=pl.len().over("_row"),
            same_provider=(
                pl.col("model_provider").str.to_lowercase()
                == pl.col("provider").str.strip_chars().str.to_lowercase()
            ).fill_null(False),
        )
        .with_columns(n_same=pl.col("same_provider").sum().over("_row"))
        # one claimant wins; among several, the one the observed provider names (if exactly one)
        .filter((pl.col("n") == 1) | (pl.col("same_provider") & (pl.col("n_same") == 1)))
        .select("_row", "model_id")
    )
    claimed = cands.join(pricing.aliases.lazy(), on="alias", how="semi").select("_row").unique()
    return (
        obs.join(hits, on="_row", how="left")
        .join(claimed.with_columns(_claimed=pl.lit(True)), on="_row", how="left")
        .with_columns(
            resolution=pl.when(
                pl.col("model").is_null() | (pl.col("model").str.strip_chars() == "")
            )
            .then(pl.lit("missing_model"))
            .when(pl.col("model_id").is_not_null())
            .then(pl.lit("resolved"))
            .when(pl.col("_claimed").fill_null(False))
            .then(pl.lit("ambiguous_alias"))
            .otherwise(pl.lit("unknown_model"))
        )
        .drop("_claimed")
        .sort("_row")
    )
