"""Charts: the spec each function builds, that it carries aggregates only, and that it renders."""

from __future__ import annotations

import io
import tempfile
from pathlib import Path
from typing import Any

import altair as alt
import numpy as np
import polars as pl
import pytest
from PIL import Image

import hylo_analytics as ha
from hylo_analytics import charts

PARENT = "run-octo-ft-1.0.0-0000"
CANDIDATE = "run-octo-ft-1.2.0-rc1-0002"

# Paired outcomes per task, straight from the scores (what the comparison module will produce).
PAIRED_SQL = """
with s as (select run_id, key, task_id, value from stg_scores where metric = 'success'),
pairs as (
    select c.task_id, c.value as cv, p.value as pv
    from s as c join s as p on p.key = c.key
    where c.run_id = $candidate and p.run_id = $parent
      and c.value is not null and p.value is not null
)
select
    task_id,
    count(*) as n_pairs,
    cast(sum(case when cv > pv then 1 else 0 end) as bigint) as candidate_wins,
    cast(sum(case when cv < pv then 1 else 0 end) as bigint) as parent_wins,
    cast(sum(case when cv = pv then 1 else 0 end) as bigint) as ties,
    avg(cv - pv) as diff
from pairs group by task_id order by task_id
"""


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec.get("layer", [spec])


def _mark(layer: dict[str, Any]) -> str:
    mark = layer["mark"]
    return mark if isinstance(mark, str) else mark["type"]


def _values(spec: dict[str, Any], layer: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The inline rows a layer draws (its own data, else the chart's)."""
    data = (layer or {}).get("data") or spec["data"]
    return data["values"]


def _png(chart: alt.TopLevelMixin, tmp_path: Path, name: str) -> Image.Image:
    path = charts.save(chart, tmp_path / f"{name}.png")
    return Image.open(io.BytesIO(path.read_bytes())).convert("L")


def _assert_not_blank(img: Image.Image) -> None:
    pixels = np.asarray(img, dtype=float)
    assert img.width > 300 and img.height > 150
    assert pixels.std() > 10, "the PNG is (nearly) one flat colour"
    assert (pixels < 128).mean() > 0.005, "almost nothing dark was drawn"


@pytest.fixture(scope="module")
def paired(sample_store: ha.Store) -> pl.DataFrame:
    """Per-task paired frame with a placeholder verdict rule (tests only) and crude p-values."""
    frame = sample_store.sql(PAIRED_SQL, {"candidate": CANDIDATE, "parent": PARENT})
    return frame.with_columns(
        (pl.col("diff") - 0.2).alias("ci_low"),
        (pl.col("diff") + 0.2).alias("ci_high"),
        pl.when(pl.col("diff") > 0.4)
        .then(pl.lit("improved"))
        .when(pl.col("diff") < -0.4)
        .then(pl.lit("regressed"))
        .when(pl.col("diff").abs() < 0.05)
        .then(pl.lit("unchanged"))
        .otherwise(pl.lit("inconclusive"))
        .alias("verdict"),
        pl.lit(0.01).alias("p_value"),
        pl.lit(0.1).alias("p_adjusted"),
    )


@pytest.fixture(scope="module")
def task_success(sample_store: ha.Store) -> pl.DataFrame:
    return sample_store.sql(
        "select *, agent_name || ' ' || agent_version as agent from mart_task_success "
        "order by agent_version, task_id"
    )


@pytest.fixture(scope="module")
def per_run(sample_store: ha.Store) -> pl.DataFrame:
    return sample_store.sql(
        """
        select r.agent_version as run, avg(e.latency_ms) * 20 / 1000 as cost,
               m.success, m.ci_low, m.ci_high
        from stg_runs as r
        join stg_events as e on e.run_id = r.run_id and e.type = 'step'
        join (select run_id, sum(successes) / sum(n_valid) as success,
                     min(ci_low) as ci_low, max(ci_high) as ci_high
              from mart_task_success group by run_id) as m on m.run_id = r.run_id
        group by all order by run
        """
    )


def test_success_rate_by_task_spec(task_success: pl.DataFrame) -> None:
    spec = charts.success_rate_by_task(task_success, run_label="agent").to_dict()
    layers = _layers(spec)
    assert [_mark(layer) for layer in layers] == ["rule", "point"]
    rule, point = layers
    assert rule["encoding"]["x"]["field"] == "ci_low"
    assert rule["encoding"]["x2"]["field"] == "ci_high"
    assert point["encoding"]["x"]["field"] == "success_rate"
    assert point["encoding"]["color"]["field"] == "agent"
    assert point["encoding"]["y"]["sort"] == sorted(set(task_success["task_id"]))
    # one row per (run, task): 3 runs x 10 tasks, never the 600 episodes behind them
    assert len(_values(spec)) == task_success.height == 30
    assert "ci" not in str(spec.get("transform", "")), "intervals are ours, not Vega's"


def test_charts_refuse_a_frame_missing_columns(task_success: pl.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"success_rate_by_task: the frame lacks column\(s\)"):
        charts.success_rate_by_task(task_success.drop("ci_low"), run_label="agent")
    with pytest.raises(ValueError, match="p_adjusted"):
        charts.paired_forest(pl.DataFrame({"task_id": ["a"], "diff": [0.1]}))


def test_paired_forest_spec(paired: pl.DataFrame) -> None:
    spec = charts.paired_forest(paired).to_dict()
    zero, bars, points = _layers(spec)
    assert _values(spec, zero) == [{"x": 0.0}]
    assert _mark(bars) == "rule" and bars["encoding"]["x2"]["field"] == "ci_high"
    enc = points["encoding"]
    assert enc["x"]["field"] == "diff"
    assert enc["color"]["scale"]["domain"] == list(charts.VERDICT_COLORS)
    assert enc["color"]["scale"]["range"] == list(charts.VERDICT_COLORS.values())
    assert enc["shape"]["field"] == "verdict"
    tips = {t["field"] for t in enc["tooltip"]}
    assert {"p_value", "p_adjusted", "candidate_wins", "parent_wins", "ties"} <= tips
    rows = _values(spec, points)
    assert len(rows) == paired.height == 10
    # sorted by difference, best first
    diffs = [r["diff"] for r in rows]
    assert diffs == sorted(diffs, reverse=True)
    assert enc["y"]["sort"] == [r["task_id"] for r in rows]


def test_paired_forest_rejects_unknown_verdicts(paired: pl.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"unknown verdict\(s\) \['better'\]"):
        charts.paired_forest(paired.with_columns(pl.lit("better").alias("verdict")))


def test_win_loss_bars_diverge_around_zero(paired: pl.DataFrame) -> None:
    spec = charts.win_loss_bars(paired).to_dict()
    rows = pl.DataFrame(_values(spec))
    assert set(rows["outcome"]) <= {"candidate wins", "ties", "parent wins"}
    assert (rows["n"] > 0).all()
    assert ((rows["end"] - rows["start"]) == rows["n"]).all()
    wins = rows.filter(pl.col("outcome") == "candidate wins")
    losses = rows.filter(pl.col("outcome") == "parent wins")
    assert (wins["start"] >= 0).all() and (losses["end"] <= 0).all()
    ties = rows.filter(pl.col("outcome") == "ties")
    assert (ties["start"] == -ties["end"]).all()
    # each task's segments add up to its pairs
    total = rows.group_by("task_id").agg(pl.col("n").sum()).sort("task_id")
    assert total["n"].to_list() == paired.sort("task_id")["n_pairs"].to_list()
    net = paired.with_columns(net=pl.col("candidate_wins") - pl.col("parent_wins"))
    order = net.sort(["net", "task_id"], descending=[True, False])["task_id"].to_list()
    assert spec["encoding"]["y"]["sort"] == order


def test_summarize_distribution_golden() -> None:
    frame = pl.DataFrame({"run": ["a"] * 5 + ["b"] * 2, "x": [1.0, 2.0, 3.0, 4.0, 10.0, 5.0, None]})
    out = charts.summarize_distribution(frame, value="x", by="run")
    a = out.row(0, named=True)
    # numpy.quantile(linear) of [1, 2, 3, 4, 10]
    assert a["n"] == 5 and a["mean"] == pytest.approx(4.0)
    assert [a[q] for q in ("q05", "q25", "q50", "q75", "q95")] == pytest.approx(
        [1.2, 2.0, 3.0, 4.0, 8.8]
    )
    assert out.row(1, named=True)["n"] == 1  # the null is not a value


def test_metric_distribution_draws_quantiles_not_values(sample_store: ha.Store) -> None:
    summary = charts.summarize_distribution(
        sample_store.table("events").filter(pl.col("type") == "step"),
        value="latency_ms",
        by="run_id",
    )
    spec = charts.metric_distribution(summary, by="run_id", value_label="latency (ms)").to_dict()
    whisker, box, median = _layers(spec)
    assert (whisker["encoding"]["x"]["field"], whisker["encoding"]["x2"]["field"]) == ("q05", "q95")
    assert (box["encoding"]["x"]["field"], box["encoding"]["x2"]["field"]) == ("q25", "q75")
    assert median["encoding"]["x"]["field"] == "q50"
    assert len(_values(spec)) == 3  # 12 358 step latencies became three rows
    assert sum(r["n"] for r in _values(spec)) == 12358


def test_metric_trend_keeps_version_order() -> None:
    frame = pl.DataFrame(
        {
            "agent_version": ["1.10.0", "1.2.0", "2.0.0"],  # not lexical order
            "value": [0.5, 0.6, 0.7],
            "ci_low": [0.4, 0.5, 0.6],
            "ci_high": [0.6, 0.7, 0.8],
        }
    )
    spec = charts.metric_trend(frame).to_dict()
    bars, line, _points = _layers(spec)
    assert line["encoding"]["x"]["sort"] == ["1.10.0", "1.2.0", "2.0.0"]
    assert (bars["encoding"]["y"]["field"], bars["encoding"]["y2"]["field"]) == (
        "ci_low",
        "ci_high",
    )
    assert len(_values(spec)) == 3


def test_metric_trend_of_many_runs_slants_and_colours_its_series() -> None:
    n = 21
    frame = pl.DataFrame(
        {
            "run": [f"octo 2.{i}.0" for i in range(n)],
            "value": [0.5] * n,
            "ci_low": [0.4] * n,
            "ci_high": [0.6] * n,
            "role": ["parent", "candidate", *["other run"] * (n - 2)],
        }
    )
    colors = {"parent": "#0072B2", "candidate": "#E69F00", "other run": "#9E9E9E"}
    spec = charts.metric_trend(
        frame, x="run", series="role", series_colors=colors, subtitle="21 of 2,000 runs"
    ).to_dict()
    _bars, _line, points = _layers(spec)
    assert points["encoding"]["x"]["axis"]["labelAngle"] == -40  # 21 labels side by side
    assert points["encoding"]["color"]["scale"] == {
        "domain": list(colors),
        "range": list(colors.values()),
    }
    assert spec["title"]["subtitle"] == "bars: 95% CI · 21 of 2,000 runs"
    assert spec["width"] == 30 * n


@pytest.mark.parametrize(
    ("cost", "success", "expected"),
    [
        ([1.0, 2.0, 3.0], [0.5, 0.6, 0.7], [True, True, True]),
        ([1.0, 2.0, 3.0], [0.7, 0.6, 0.5], [True, False, False]),
        ([3.0, 1.0, 2.0, 2.0], [0.9, 0.5, 0.8, 0.4], [True, True, True, False]),
        ([1.0, 1.0], [0.5, 0.6], [False, True]),  # same cost, better wins
    ],
)
def test_pareto_front(cost: list[float], success: list[float], expected: list[bool]) -> None:
    frame = pl.DataFrame({"cost": cost, "success": success})
    assert charts.pareto_front(frame).to_list() == expected


def test_cost_vs_success_marks_the_front(per_run: pl.DataFrame) -> None:
    spec = charts.cost_vs_success(per_run, cost_label="inference s / episode").to_dict()
    front_line, _bars, points, labels = _layers(spec)
    rows = pl.DataFrame(_values(spec, points))
    assert rows.height == 3
    assert rows["on_front"].to_list() == charts.pareto_front(per_run).to_list()
    front = rows.filter(pl.col("on_front")).sort("cost").to_dicts()
    assert _values(spec, front_line) == front
    assert points["encoding"]["color"]["field"] == "front"
    assert labels["encoding"]["text"]["field"] == "label"
    assert rows["label"].to_list() == rows["run"].to_list()  # each point named by its run


def test_cost_vs_success_draws_a_given_front_and_labels(per_run: pl.DataFrame) -> None:
    """A few runs drawn from many carry the front of them all and label only some."""
    given = per_run.with_columns(
        on_front=pl.Series([True, False, False]), label=pl.Series(["a", "", ""])
    )
    spec = charts.cost_vs_success(given, subtitle="3 of 2,000 runs").to_dict()
    front_line, _bars, points, _labels = _layers(spec)
    rows = pl.DataFrame(_values(spec, points))
    assert rows["on_front"].to_list() == [True, False, False]  # not recomputed
    assert rows["label"].to_list() == ["a", "", ""]
    assert [r["run"] for r in _values(spec, front_line)] == [per_run["run"][0]]
    assert spec["title"]["subtitle"].endswith("· 3 of 2,000 runs")


def test_coverage_breakdown(sample_store: ha.Store) -> None:
    frame = sample_store.sql(
        "select run_id as run, metric, case when value is not null then 'scored' "
        "else skip_reason end as reason, count(*) as n from stg_scores group by all"
    )
    spec = charts.coverage_breakdown(frame).to_dict()
    enc = spec["spec"]["encoding"] if "spec" in spec else spec["encoding"]
    assert enc["color"]["scale"]["domain"] == ["scored", "episode errored"]
    assert enc["x"]["field"] == "n" and enc["x"]["aggregate"] == "sum"
    rows = pl.DataFrame(spec["data"]["values"])
    assert rows.height == frame.height == 18
    assert rows["n"].sum() == 1800  # every score row is in a bar: 3 runs x 3 metrics x 200


@pytest.mark.slow
def test_every_chart_renders_png_svg_and_html(
    tmp_path: Path,
    task_success: pl.DataFrame,
    paired: pl.DataFrame,
    per_run: pl.DataFrame,
) -> None:
    trend = per_run.select(pl.col("run").alias("agent_version"), "ci_low", "ci_high").with_columns(
        value=(pl.col("ci_low") + pl.col("ci_high")) / 2
    )
    summary = pl.DataFrame(
        {
            "run": ["a", "b"],
            "n": [10, 10],
            "q05": [1.0, 2.0],
            "q25": [2.0, 3.0],
            "q50": [3.0, 4.0],
            "q75": [4.0, 5.0],
            "q95": [5.0, 6.0],
        }
    )
    built = {
        "success": charts.success_rate_by_task(task_success, run_label="agent"),
        "forest": charts.paired_forest(paired),
        "winloss": charts.win_loss_bars(paired),
        "distribution": charts.metric_distribution(summary),
        "trend": charts.metric_trend(trend),
        "cost": charts.cost_vs_success(per_run),
        "coverage": charts.coverage_breakdown(
            pl.DataFrame(
                {
                    "run": ["a", "a", "b"],
                    "metric": ["m"] * 3,
                    "reason": ["scored", "timeout", "scored"],
                    "n": [8, 2, 10],
                }
            )
        ),
    }
    for name, chart in built.items():
        _assert_not_blank(_png(chart, tmp_path, name))
        svg = charts.save(chart, tmp_path / f"{name}.svg").read_text()
        assert svg.startswith("<svg") and "<text" in svg
        page = charts.save(chart, tmp_path / f"{name}.html").read_text()
        assert "<script" in page
        assert 'src="http' not in page, f"{name}.html loads scripts from the network"


def test_save_rejects_unknown_suffix(tmp_path: Path, paired: pl.DataFrame) -> None:
    with pytest.raises(ValueError, match=r"cannot save a chart as '\.pdf'"):
        charts.save(charts.win_loss_bars(paired), tmp_path / "x.pdf")


def test_unsigned_counts_do_not_wrap() -> None:
    # polars sums booleans to UInt32; parent wins > candidate wins must stay negative
    frame = pl.DataFrame(
        {"task_id": ["a", "b"], "candidate_wins": [1, 5], "parent_wins": [6, 0], "ties": [3, 3]},
        schema_overrides={c: pl.UInt32 for c in ("candidate_wins", "parent_wins", "ties")},
    )
    spec = charts.win_loss_bars(frame).to_dict()
    assert spec["encoding"]["y"]["sort"] == ["b", "a"]
    losses = [r for r in _values(spec) if r["outcome"] == "parent wins" and r["task_id"] == "a"]
    assert losses == [
        {"task_id": "a", "outcome": "parent wins", "n": 6, "start": -7.5, "end": -1.5}
    ]


def test_success_rate_zoom(task_success: pl.DataFrame) -> None:
    spec = charts.success_rate_by_task(task_success, run_label="agent", full_scale=False).to_dict()
    assert spec["layer"][1]["encoding"]["x"]["scale"] == {"zero": False}


def test_charts_take_the_packages_own_frames(sample_store: ha.Store) -> None:
    parent, cand = "run-octo-ft-1.0.0-0000", "run-octo-ft-1.2.0-rc1-0002"
    comparison = sample_store.compare(cand, parent, by=["task_id"], n_resamples=200)
    forest = charts.paired_forest(comparison).to_dict()
    assert forest["title"]["text"] == f"{cand} \u2212 {parent}, per task"
    drawn = pl.DataFrame(forest["layer"][-1]["data"]["values"])  # the points: one per task
    per_task = comparison.filter(pl.col("level") != "overall")
    assert drawn.height == 10
    assert sorted(drawn["diff"]) == sorted(per_task["mean_diff"])
    charts.win_loss_bars(comparison).to_dict()
    tasks = ha.aggregate_scores(sample_store, by=["run_id", "task_id"])  # every metric
    spec = charts.success_rate_by_task(tasks).to_dict()
    rows = pl.DataFrame(spec["data"]["values"])
    assert rows.height == 30 and set(rows["run_id"]) == set(tasks["run_id"])
    both = sample_store.compare([cand, "run-octo-ft-1.1.0-0001"], parent, by=["task_id"], ci="none")
    with pytest.raises(ValueError, match="holds 2 candidates"):
        charts.paired_forest(both)


def test_a_missing_label_is_drawn_not_a_crash() -> None:
    frame = pl.DataFrame(
        {
            "run": ["a", None],
            "task_id": ["t", "t"],
            "success_rate": [0.5, 0.7],
            "ci_low": [0.1, 0.3],
            "ci_high": [0.9, 0.9],
            "n_valid": [4, 5],
        }
    )
    spec = charts.success_rate_by_task(frame).to_dict()
    assert {r["run"] for r in spec["data"]["values"]} == {"a", "(none)"}
    charts.save(charts.success_rate_by_task(frame), Path(tempfile.mkdtemp()) / "x.svg")


def test_png_and_svg_of_a_label_holding_terminal_escapes(tmp_path: Path) -> None:
    """vl-convert aborts the process on a label holding ESC or BEL: saving escapes them."""
    frame = pl.DataFrame({"run": ["a\x1b[2Jb\x07", "plain"], "rate": [0.5, 0.7]})
    chart = alt.Chart(frame.to_pandas()).mark_bar().encode(x="run:N", y="rate:Q")
    png = charts.save(chart, tmp_path / "c.png")
    svg = charts.save(chart, tmp_path / "c.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = svg.read_text()
    assert "\x1b" not in text and "\x07" not in text and "<svg" in text


def _notebook_html(chart: alt.TopLevelMixin) -> str:
    bundle = chart._repr_mimebundle_()
    html: str = (bundle[0] if isinstance(bundle, tuple) else bundle)["text/html"]
    return html


def test_notebook_charts_need_no_network(paired: pl.DataFrame) -> None:
    """A chart's notebook output carries vega inline: no script loads from http(s)."""
    import re

    assert alt.renderers.active == "hylo"
    html = _notebook_html(charts.paired_forest(paired))
    assert not re.search(r"<script[^>]*\bsrc\s*=", html, re.IGNORECASE)
    assert "cdn.jsdelivr" not in html and "window.vegaEmbed=" in html
    assert html.count("<script") == 1


@pytest.mark.browser
def test_notebook_charts_draw_offline_in_a_browser(paired: pl.DataFrame, tmp_path: Path) -> None:
    """Two chart outputs in one page, every request off the page refused: both draw (the
    second output does not run the bundle again, whose top-level names would clash)."""
    import shutil

    chromium = next(
        (p for p in ("/usr/bin/chromium", shutil.which("chromium")) if p and Path(p).exists()),
        None,
    )
    if chromium is None:
        pytest.skip("no Chromium")
    sync_api = pytest.importorskip("playwright.sync_api")
    page_file = tmp_path / "notebook.html"
    outputs = [charts.paired_forest(paired), charts.win_loss_bars(paired)]
    page_file.write_text("<!doctype html><html><body>" + "".join(map(_notebook_html, outputs)))
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page: Any = browser.new_page()
        errors: list[str] = []
        requested: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("request", lambda r: requested.append(r.url))
        page.route("http*://**", lambda route: route.abort())
        page.goto(page_file.as_uri())
        page.wait_for_function(
            "document.querySelectorAll('.vega-embed-hylo > .chart-wrapper > svg, "
            ".vega-embed-hylo > .chart-wrapper > canvas').length === 2",
            timeout=20_000,
        )
        browser.close()
    assert errors == [] and [u for u in requested if u.startswith("http")] == []
