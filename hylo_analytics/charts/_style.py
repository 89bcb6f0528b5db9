"""Palettes, frame checks and saving, shared by every chart."""

from __future__ import annotations

import functools
import json
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl
import polars.selectors as cs

from hylo_analytics._html import HIDDEN, ScriptJSONEncoder, shorten
from hylo_analytics._text import printable_spec
from hylo_analytics.errors import InputError

__all__ = ["LABEL_CHARS", "VERDICT_COLORS", "save", "use_safe_renderer"]

# a name drawn in a chart is cut to this many characters: an axis shows ~40 anyway, and a
# 10 MB name from a hostile log would otherwise stall Vega's text measuring (and the page)
LABEL_CHARS = 200

# Okabe-Ito colours, safe for the common colour-vision deficiencies; shapes repeat the verdict
# so it survives greyscale printing too.
VERDICT_COLORS: dict[str, str] = {
    "improved": "#0072B2",
    "regressed": "#D55E00",
    "unchanged": "#6E6E6E",
    "inconclusive": "#E69F00",
}
_VERDICT_SHAPES = {
    "improved": "triangle-up",
    "regressed": "triangle-down",
    "unchanged": "circle",
    "inconclusive": "diamond",
}
_OUTCOME_COLORS = {"candidate wins": "#0072B2", "ties": "#BDBDBD", "parent wins": "#D55E00"}
_REASON_COLORS = ("#E69F00", "#D55E00", "#CC79A7", "#009E73", "#56B4E9", "#F0E442", "#999999")
_SCORED_COLOR = "#0072B2"
_RUN_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
_QUANTILES = {"q05": 0.05, "q25": 0.25, "q50": 0.5, "q75": 0.75, "q95": 0.95}


def _require(frame: pl.DataFrame, columns: Sequence[str], chart: str) -> pl.DataFrame:
    """Select ``columns``; a missing one is an error naming the chart and what it needs."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            f"{chart}: the frame lacks column(s) {missing}; expected {list(columns)}, "
            f"got {frame.columns}"
        )
    return _cut(frame.select(columns))


def _cut(frame: pl.DataFrame) -> pl.DataFrame:
    """String columns as Vega can draw them: cut to :data:`LABEL_CHARS` (with an ellipsis),
    control, bidi and line-separator characters shown as U+FFFD (Vega-Lite writes sort
    values into expressions, whose parser fails on U+2028)."""
    # categorical names (a ranking's two million pairs) are text to cut like any other
    frame = frame.with_columns(cs.categorical().cast(pl.String), cs.enum().cast(pl.String))
    shown = pl.col(pl.String).str.replace_all(f"[{HIDDEN}]", "\ufffd")
    return frame.with_columns(
        pl.when(shown.str.len_chars() > LABEL_CHARS)
        .then(shown.str.slice(0, LABEL_CHARS - 1) + "\u2026")
        .otherwise(shown)
        .name.keep()
    )


def _comparison_rows(frame: pl.DataFrame, chart: str) -> pl.DataFrame:
    """A ``compare_runs`` / ``compare_scores`` frame as the rows the charts draw.

    Its per-group rows (``level`` not ``overall``) of one candidate and one metric; a frame of
    overall rows only (one per comparison, as a notebook lays suites side by side) is drawn as
    it is, each row labelled by its ``task_id`` or, lacking one, its candidate. The engine's
    names are mapped to the charts' (``mean_diff`` -> ``diff``, ``p_verdict`` -> ``p_adjusted``)
    and, where the frame has it, the interval drawn is **the verdict's** (``ci_adj_*``, at
    ``ci_adj_level``: the one the verdict was decided on), named in ``_ci_label``; a frame with
    nothing to draw is an error, never an empty chart.
    """
    rows = frame
    if "level" in frame.columns:
        rows = frame.filter(pl.col("level") != "overall")
        if rows.is_empty():  # overall rows only: each is a comparison to draw
            rows = frame
            if "task_id" not in rows.columns or rows["task_id"].is_null().all():
                label = "candidate" if "candidate" in rows.columns else None
                rows = rows.with_columns(
                    task_id=pl.col(label).cast(pl.String) if label else pl.lit("overall")
                )
        else:
            for col in ("candidate", "metric"):
                if col in rows.columns and rows[col].n_unique() > 1:
                    raise InputError(
                        f"{chart}: the comparison holds {rows[col].n_unique()} {col}s "
                        f"({', '.join(map(str, rows[col].unique().sort().to_list()[:5]))}); "
                        f"filter it to one first, e.g. frame.filter(pl.col({col!r}) == ...)"
                    )
    if rows.is_empty():
        raise InputError(
            f"{chart}: the frame has no rows to draw (a comparison's per-task rows, or its "
            "overall rows); an empty chart would look like an answer"
        )
    renames = {"mean_diff": "diff", "p_verdict": "p_adjusted"}
    rows = rows.rename({a: b for a, b in renames.items() if a in rows and b not in rows})
    if "verdict_ci_low" in rows.columns and "ci_adj_low" not in rows.columns:  # the report's
        rows = rows.rename({"verdict_ci_low": "ci_adj_low", "verdict_ci_high": "ci_adj_high",
                            "verdict_ci_level": "ci_adj_level"})  # fmt: skip
    if "ci_adj_low" in rows.columns and rows["ci_adj_low"].is_not_null().any():
        levels = rows["ci_adj_level"].drop_nulls().unique().to_list()
        label = (
            f"the verdict's {levels[0] * 100:.3g}% interval"
            if len(levels) == 1
            else "the verdict's interval (its level per row)"
        )
        return rows.with_columns(
            ci_low=pl.col("ci_adj_low"), ci_high=pl.col("ci_adj_high"), _ci_label=pl.lit(label)
        )
    return rows.with_columns(_ci_label=pl.lit("95% CI"))


def _labels(frame: pl.DataFrame, column: str) -> pl.DataFrame:
    """Missing labels (a run with no agent version) drawn as "(none)", never a crash."""
    if frame.schema[column] == pl.String:
        return frame.with_columns(pl.col(column).fill_null("(none)"))
    return frame.with_columns(pl.col(column).cast(pl.String).fill_null("(none)"))


def _data(frame: pl.DataFrame) -> alt.Data:
    """Inline the (small, aggregated) rows; decimals become floats, which JSON can carry."""
    plain = frame.with_columns(pl.col(pl.Decimal).cast(pl.Float64))
    return alt.Data(values=plain.to_dicts())  # type: ignore[no-untyped-call]


def _order(frame: pl.DataFrame, column: str) -> list[Any]:
    """Categories in the frame's row order (the caller sorted them on purpose)."""
    return frame.get_column(column).unique(maintain_order=True).to_list()


def _styled(chart: Any) -> Any:
    """House look: legible fonts, no chart border, titles left-aligned with a subtitle."""
    return (
        chart.configure(font="DejaVu Sans, Helvetica, Arial, sans-serif")
        .configure_view(strokeWidth=0)
        .configure_axis(
            labelFontSize=12, titleFontSize=13, titleFontWeight="normal", labelLimit=260
        )
        .configure_legend(labelFontSize=12, titleFontSize=12, orient="top")
        .configure_title(fontSize=16, subtitleFontSize=12, anchor="start", subtitleColor="#555")
        .configure_header(labelFontSize=12, titleFontSize=13)
    )


def _title(text: str, subtitle: str) -> alt.TitleParams:
    shown = re.sub(f"[{HIDDEN}]", "\ufffd", text)
    return alt.TitleParams(text=shorten(shown, LABEL_CHARS), subtitle=subtitle)


# -- per task -----------------------------------------------------------------------------


def save(chart: alt.TopLevelMixin, path: str | Path) -> Path:
    """Save as .html (self-contained), .png or .svg, chosen by the suffix."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".html":
        # altair's template puts the spec in <script> as plain JSON: a name holding
        # "</script>" would end it, so the spec is written with < > & escaped
        chart.save(str(path), inline=True, json_kwds={"cls": ScriptJSONEncoder})
    elif path.suffix in (".png", ".svg"):
        # vl-convert aborts the process on a label holding ESC or BEL: every string printable
        import vl_convert as vlc

        spec = printable_spec(chart.to_dict())
        if path.suffix == ".png":
            _atomic_bytes(path, vlc.vegalite_to_png(spec, scale=2))
        else:
            _atomic_bytes(path, vlc.vegalite_to_svg(spec).encode())
    else:
        raise InputError(f"cannot save a chart as {path.suffix!r}; use .html, .png or .svg")
    return path


def _atomic_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


# A notebook output that draws its chart with no network: vega, vega-lite and vega-embed
# (vl-convert's bundle) inline in the output itself. The bundle declares top-level names, so
# it runs inside a function (a second chart in the same page would redeclare them) and only
# when no earlier output of the page defined ``vegaEmbed``; it ends by setting window.vegaEmbed.
_INLINE_OUTPUT = """\
<div class="vega-embed-hylo" id="{div}"></div>
<script type="text/javascript">
(function () {{
  if (typeof window.vegaEmbed !== "function") {{
    (function () {{
{bundle}
    }}).call(window);
  }}
  window.vegaEmbed("#{div}", {spec}, {options}).catch(console.error);
}})();
</script>
"""


@functools.lru_cache(maxsize=1)
def _vega_bundle() -> str:
    """vega-embed with vega and vega-lite, as one script (vl-convert ships it: no network)."""
    import vl_convert as vlc
    from altair.utils._importers import vl_version_for_vl_convert

    # the default snippet sets window.vegaEmbed (the stub wrongly requires a snippet)
    bundle: str = vlc.javascript_bundle(vl_version=vl_version_for_vl_convert())  # type: ignore[call-arg]
    if re.search(r"</script|<!--", bundle, re.IGNORECASE):  # would end the element early
        raise RuntimeError("vl-convert's javascript bundle cannot sit inside <script>")
    return bundle


def inline_renderer(spec: dict[str, Any], **metadata: Any) -> dict[str, str]:
    """An altair renderer: the chart as HTML that draws with no network (the vega scripts
    inline, the spec written with :class:`~hylo_analytics._html.ScriptJSONEncoder`)."""
    options = {"mode": "vega-lite", **(metadata.get("embed_options") or {})}
    html = _INLINE_OUTPUT.format(
        div=f"hylo-chart-{uuid.uuid4().hex}",
        bundle=_vega_bundle(),
        spec=json.dumps(spec, cls=ScriptJSONEncoder),
        options=json.dumps(options, cls=ScriptJSONEncoder),
    )
    return {"text/html": html}


def use_safe_renderer() -> None:
    """Let notebooks show charts through a renderer that escapes the spec and needs no network.

    Altair's ``default`` renderer embeds the spec in ``<script>`` as plain JSON, so a run name
    holding ``</script>`` runs in the notebook, and it loads vega from a CDN, so a notebook
    opened offline shows blank charts. :func:`inline_renderer` writes the spec with
    :class:`~hylo_analytics._html.ScriptJSONEncoder` and the vega scripts inline (about 0.9 MB
    per chart output); it is registered as ``hylo`` and enabled when ``default`` is active
    with no options; a renderer the user chose is left alone. ``hylo-cdn`` is the same
    escaping with the scripts from the CDN (light notebooks, online only).
    """
    from altair.utils.display import HTMLRenderer
    from altair.vegalite.v6.display import html_renderer

    cdn = HTMLRenderer(**{**html_renderer.kwargs, "json_kwds": {"cls": ScriptJSONEncoder}})
    alt.renderers.register("hylo-cdn", cdn)
    alt.renderers.register("hylo", inline_renderer)
    if alt.renderers.active == "default" and not alt.renderers.options:
        alt.renderers.enable("hylo")
