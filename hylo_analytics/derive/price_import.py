"""Price importers: external price lists turned into a pricing file, explicitly and on record.

Autobench's rule: ``StaticPriceSource``, ``LLMPricesSource`` and ``GenAIPricesSource`` only
*import* external price data into our pricing model; no external catalogue is consulted when a
cost is computed. So an import is a separate, explicit step (``hylo-analytics pricing import``)
that writes an ordinary pricing YAML file, reviewed and versioned like any other, with a
``provenance:`` block beside ``pricing:`` (source kind, file name and sha256, ``imported_at``,
the selected models, and every entry that was not imported and why). :func:`load_pricing`
reads the result; the cost deriver never reads the source file.

Shapes read (as published upstream):

* ``llm-prices`` (simonw/llm-prices): a vendor file ``{"vendor", "models": [{"id", "name",
  "price_history": [{"input", "output", "input_cached", "from_date", "to_date"}]}]}`` (prices in
  USD per million tokens; the current price is the entry with ``to_date: null``), or the
  combined ``{"prices": [{"id", "vendor", "input", "output", "input_cached"}]}``.
* ``genai-prices`` (pydantic/genai-prices): ``data.json`` (a list of providers) or one
  provider's file, ``{"id", "models": [{"id", "match", "prices": {"input_mtok", "output_mtok",
  "cache_read_mtok", "cache_write_mtok"}}]}``. A tiered price ``{"base", "tiers": [{"start",
  "price"}]}`` becomes our tiers with ``tier_rule: whole_request`` and ``tier_basis: prompt``
  (since genai-prices' threshold fix, pydantic/genai-prices#241, a request whose prompt crosses
  a tier's ``start`` pays that tier's rate on all of its tokens); ``equals`` names of
  ``match`` become aliases.
* ``static``: a file already in our pricing shape (YAML or JSON), validated and stamped.

Reported, never guessed: an entry with no current price or several, a price list with date
constraints, a non-numeric or negative price, a price kind we do not model (audio, images,
requests), a ``match`` rule other than exact names, a model id listed twice, a selected model
the file does not have.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from hylo_analytics import _atomic
from hylo_analytics._config import ConfigError
from hylo_analytics._lazy import LazyModule
from hylo_analytics.derive.pricing import PricingTable, parse_pricing
from hylo_analytics.errors import InputNotFoundError

if TYPE_CHECKING:
    import yaml
else:
    yaml = LazyModule("yaml")

__all__ = [
    "SOURCES",
    "GenAIPricesSource",
    "ImportProblem",
    "ImportedPricing",
    "LLMPricesSource",
    "StaticPriceSource",
    "import_prices",
]


@dataclass(frozen=True)
class ImportProblem:
    """An entry not imported (or imported in part): which entry, which field, why."""

    entry: str
    field: str
    error: str

    def __str__(self) -> str:
        return f"{self.entry}: {self.field}: {self.error}"


@dataclass(frozen=True, eq=False)
class ImportedPricing:
    """The pricing document an import produced, its provenance and what it left out."""

    pricing: dict[str, Any]
    provenance: dict[str, Any]
    problems: tuple[ImportProblem, ...]

    def document(self) -> dict[str, Any]:
        return {"provenance": self.provenance, "pricing": self.pricing}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.document(), sort_keys=False, allow_unicode=True)

    def table(self) -> PricingTable:
        """The pricing table, as :func:`load_pricing` will read the written file."""
        raw = self.to_yaml().encode()
        return parse_pricing(yaml.safe_load(raw), sha256=hashlib.sha256(raw).hexdigest())

    def write(self, path: str | Path) -> Path:
        """Write the file (temp file then rename: never half-written); returns its path."""
        path = Path(path)
        text = self.to_yaml()
        self.table()  # what is written must load
        _atomic.write_text(path, text)
        return path


class _Source:
    kind: ClassVar[str]

    def entries(
        self, doc: Any, problems: list[ImportProblem]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """(model id, our model spec) per importable entry; problems appended as found."""
        raise NotImplementedError

    def read(self, path: Path) -> Any:
        text = path.read_bytes()
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(str(path), f"not valid JSON for {self.kind}: {exc}") from exc

    def import_file(
        self, path: str | Path, *, models: Sequence[str] | None = None, now: datetime | None = None
    ) -> ImportedPricing:
        path = Path(path)
        if not path.is_file():
            raise InputNotFoundError(f"price file not found: {path}; check the path")
        doc = self.read(path)
        problems: list[ImportProblem] = []
        found: dict[str, dict[str, Any]] = {}
        for model_id, spec in self.entries(doc, problems):
            if model_id in found:
                problems.append(ImportProblem(model_id, "id", "listed twice: neither is imported"))
                found[model_id] = {}
                continue
            found[model_id] = spec
        found = {k: v for k, v in found.items() if v}
        if models is not None:
            wanted = {m.lower() for m in models}
            picked = {
                k: v
                for k, v in found.items()
                if k.lower() in wanted or k.split("/", 1)[-1].lower() in wanted
            }
            matched = {k.lower() for k in picked} | {k.split("/", 1)[-1].lower() for k in picked}
            problems += [
                ImportProblem(m, "model", "selected but not in the file (or not importable)")
                for m in models
                if m.lower() not in matched
            ]
            found = picked
        if not found:
            raise ConfigError(
                str(path),
                f"no model imported from this {self.kind} file: "
                + ("; ".join(map(str, problems[:5])) or "it lists none"),
            )
        _report_shared_aliases(found, problems)
        provenance = {
            "source_kind": self.kind,
            "file": path.name,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            "imported_at": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
            "selected_models": sorted(found) if models is None else list(models),
            "not_imported": [
                {"entry": p.entry, "field": p.field, "error": p.error} for p in problems
            ],
        }
        pricing = {"version": 1, "models": dict(sorted(found.items()))}
        return ImportedPricing(pricing, provenance, tuple(problems))


class StaticPriceSource(_Source):
    """A file already in our pricing shape (YAML or JSON), validated and stamped."""

    kind = "static"

    def read(self, path: Path) -> Any:
        try:
            return yaml.safe_load(path.read_bytes())
        except yaml.YAMLError as exc:
            raise ConfigError(str(path), f"not valid YAML: {exc}") from exc

    def entries(
        self, doc: Any, problems: list[ImportProblem]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        table = parse_pricing(doc, sha256="")  # the whole file validated, with key paths
        top = doc["pricing"] if isinstance(doc, Mapping) and "pricing" in doc else doc
        for model_id, spec in top["models"].items():
            spec = dict(spec)
            if table.provider is not None and "provider" not in spec and "/" not in model_id:
                spec["provider"] = table.provider
            yield model_id, spec


_LLM_KINDS = {"input": "input", "output": "output", "input_cached": "cache_read"}


class LLMPricesSource(_Source):
    """simonw/llm-prices: a vendor file (``price_history``) or the combined ``prices`` list."""

    kind = "llm-prices"

    def entries(
        self, doc: Any, problems: list[ImportProblem]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        if isinstance(doc, Mapping) and isinstance(doc.get("prices"), list):
            for i, e in enumerate(doc["prices"]):
                yield from self._entry(
                    e,
                    e.get("vendor") if isinstance(e, Mapping) else None,
                    e,
                    f"prices[{i}]",
                    problems,
                )
            return
        if not (isinstance(doc, Mapping) and isinstance(doc.get("models"), list)):
            raise ConfigError(
                "", "expected llm-prices JSON: {vendor, models: [...]} or {prices: [...]}"
            )
        vendor = doc.get("vendor")
        for i, m in enumerate(doc["models"]):
            where = f"models[{i}]"
            if not isinstance(m, Mapping):
                problems.append(ImportProblem(where, "", "expected an object"))
                continue
            history = m.get("price_history")
            current = (
                [h for h in history if isinstance(h, Mapping) and h.get("to_date") is None]
                if isinstance(history, list)
                else []
            )
            name = str(m.get("id", where))
            if len(current) != 1:
                why = (
                    "no current price (every price_history entry has a to_date)"
                    if not current
                    else f"{len(current)} current prices (to_date null): ambiguous"
                )
                problems.append(ImportProblem(name, "price_history", why))
                continue
            yield from self._entry(m, vendor, current[0], name, problems)

    def _entry(
        self, m: Any, vendor: Any, price: Any, where: str, problems: list[ImportProblem]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        ident = m.get("id") if isinstance(m, Mapping) else None
        if not isinstance(ident, str) or not ident or not isinstance(vendor, str) or not vendor:
            problems.append(ImportProblem(where, "id/vendor", "expected non-empty strings"))
            return
        spec: dict[str, Any] = {"aliases": [ident, f"{vendor}:{ident}"], "provider": vendor}
        for theirs, ours in _LLM_KINDS.items():
            value = price.get(theirs)
            if value is None:
                continue
            if not _price_ok(value):
                problems.append(
                    ImportProblem(ident, theirs, f"expected a price >= 0, got {value!r}")
                )
                return
            spec[ours] = {"unit": "mtok", "price_per_million_tokens": float(value)}
        if "input" not in spec or "output" not in spec:
            problems.append(ImportProblem(ident, "input/output", "both prices are needed"))
            return
        yield f"{vendor}/{ident}", spec


_GENAI_KINDS = {
    "input_mtok": "input",
    "output_mtok": "output",
    "cache_read_mtok": "cache_read",
    "cache_write_mtok": "cache_write",
}


class GenAIPricesSource(_Source):
    """pydantic/genai-prices: ``data.json`` (list of providers) or one provider's file."""

    kind = "genai-prices"

    def read(self, path: Path) -> Any:
        try:  # data.json is JSON; a provider file (providers/*.yml) is YAML, a superset
            return yaml.safe_load(path.read_bytes())
        except yaml.YAMLError as exc:
            raise ConfigError(str(path), f"not valid JSON/YAML for genai-prices: {exc}") from exc

    def entries(
        self, doc: Any, problems: list[ImportProblem]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        providers = [doc] if isinstance(doc, Mapping) else doc
        if not isinstance(providers, list):
            raise ConfigError("", "expected genai-prices data: a list of providers or one provider")
        for pi, prov in enumerate(providers):
            pid = prov.get("id") if isinstance(prov, Mapping) else None
            if not isinstance(pid, str) or not isinstance(prov.get("models"), list):
                problems.append(
                    ImportProblem(f"providers[{pi}]", "id/models", "expected a provider")
                )
                continue
            for mi, m in enumerate(prov["models"]):
                mid = m.get("id") if isinstance(m, Mapping) else None
                if not isinstance(mid, str):
                    problems.append(ImportProblem(f"{pid}.models[{mi}]", "id", "expected a string"))
                    continue
                spec = self._model(pid, mid, m, problems)
                if spec is not None:
                    yield f"{pid}/{mid}", spec

    def _model(
        self, pid: str, mid: str, m: Mapping[str, Any], problems: list[ImportProblem]
    ) -> dict[str, Any] | None:
        entry = f"{pid}/{mid}"
        prices = m.get("prices")
        if isinstance(prices, list):
            problems.append(
                ImportProblem(
                    entry,
                    "prices",
                    f"{len(prices)} prices under date/time constraints: "
                    "which one applies is not ours to pick at import",
                )
            )
            return None
        if not isinstance(prices, Mapping):
            problems.append(ImportProblem(entry, "prices", "expected a mapping of prices"))
            return None
        names = {mid}
        rules: list[str] = []
        _match_names(m.get("match"), names, rules)
        if rules:
            problems.append(
                ImportProblem(
                    entry,
                    "match",
                    f"only exact names become aliases; not kept: {', '.join(sorted(set(rules)))}",
                )
            )
        spec: dict[str, Any] = {
            "aliases": sorted(names | {f"{pid}:{n}" for n in names}),
            "provider": pid,
        }
        for key, value in prices.items():
            ours = _GENAI_KINDS.get(key)
            if ours is None:
                problems.append(ImportProblem(entry, f"prices.{key}", "price kind not modelled"))
                continue
            rate = _genai_rate(value)
            if isinstance(rate, str):
                problems.append(ImportProblem(entry, f"prices.{key}", rate))
                return None
            spec[ours] = rate
        if "input" not in spec or "output" not in spec:
            problems.append(ImportProblem(entry, "prices", "input_mtok and output_mtok are needed"))
            return None
        return spec


def _genai_rate(value: Any) -> dict[str, Any] | str:
    """Our rate spec for a genai-prices price, or why it cannot be one."""
    if _price_ok(value):
        return {"unit": "mtok", "price_per_million_tokens": float(value)}
    if not (isinstance(value, Mapping) and _price_ok(value.get("base"))):
        return f"expected a price >= 0 or {{base, tiers}}, got {value!r}"
    tiers = value.get("tiers")
    if not isinstance(tiers, list) or not tiers:
        return "expected a non-empty tiers list"
    out, price, last = [], float(value["base"]), 0
    for t in tiers:
        start = t.get("start") if isinstance(t, Mapping) else None
        if isinstance(start, bool) or not isinstance(start, int) or start <= last:
            return f"tier starts must be ascending integers > 0, got {start!r}"
        if not _price_ok(t.get("price")):
            return f"expected a tier price >= 0, got {t.get('price')!r}"
        out.append({"up_to_tokens": start, "price_per_million_tokens": price})
        price, last = float(t["price"]), start
    out.append({"price_per_million_tokens": price})
    # genai-prices' tiers are thresholds on the prompt (its #241 fix): the whole request pays
    return {"unit": "mtok", "tier_rule": "whole_request", "tier_basis": "prompt", "tiers": out}


def _match_names(clause: Any, names: set[str], rules: list[str]) -> None:
    if not isinstance(clause, Mapping):
        return
    for key, value in clause.items():
        if key == "equals" and isinstance(value, str):
            names.add(value)
        elif key == "or" and isinstance(value, list):
            for c in value:
                _match_names(c, names, rules)
        else:
            rules.append(f"{key}: {value!r}" if not isinstance(value, list) else key)


def _price_ok(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _report_shared_aliases(
    found: Mapping[str, Mapping[str, Any]], problems: list[ImportProblem]
) -> None:
    """An alias two imported models claim resolves by provider, else ``ambiguous_alias``."""
    owners: dict[str, list[str]] = {}
    for model_id, spec in found.items():
        for alias in {a.lower() for a in spec.get("aliases", [])}:
            owners.setdefault(alias, []).append(model_id)
    for alias, ids in sorted(owners.items()):
        if len(ids) > 1:
            problems.append(
                ImportProblem(
                    alias,
                    "aliases",
                    f"claimed by {sorted(ids)}: the observed provider "
                    "must tell them apart, else costs get ambiguous_alias",
                )
            )


SOURCES: dict[str, type[_Source]] = {
    s.kind: s for s in (StaticPriceSource, LLMPricesSource, GenAIPricesSource)
}


def import_prices(
    kind: str,
    path: str | Path,
    *,
    models: Sequence[str] | None = None,
    now: datetime | None = None,
) -> ImportedPricing:
    """Import ``path`` with the source ``kind`` (``static | llm-prices | genai-prices``)."""
    if kind not in SOURCES:
        raise ConfigError("source", f"expected one of {sorted(SOURCES)}, got {kind!r}")
    return SOURCES[kind]().import_file(path, models=models, now=now)
