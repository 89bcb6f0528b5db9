"""Altair charts over aggregates (never raw rows): each function returns an Altair chart.

Every function takes an *already aggregated* polars frame (one row per task, run or version)
whose columns are listed in its docstring: the frame contracts below are what the aggregation
and comparison modules produce, so a chart never ships thousands of rows to Vega. Intervals
are computed by hylo_analytics, never by Vega's bootstrap ``ci``, so a chart shows the same
numbers as the tables beside it. :func:`save` writes HTML (self-contained), PNG or SVG with no
network (vl-convert). Importing this module enables a renderer (``hylo``) that escapes the
spec (names in a spec are untrusted text) and carries vega inline, so a notebook chart draws
offline, unless another renderer was chosen.
"""

from hylo_analytics.charts._style import VERDICT_COLORS, save, use_safe_renderer
from hylo_analytics.charts.calibration import calibration_intervals
from hylo_analytics.charts.comparison import paired_forest, success_rate_by_task, win_loss_bars
from hylo_analytics.charts.critical_difference import critical_difference_diagram
from hylo_analytics.charts.item_matrix import OUTCOME_COLORS, flip_matrix
from hylo_analytics.charts.pareto import pareto_intervals
from hylo_analytics.charts.pass_k import pass_k_curves
from hylo_analytics.charts.ranking import ranking_matrix, strength_intervals
from hylo_analytics.charts.runs import (
    cost_vs_success,
    coverage_breakdown,
    metric_distribution,
    metric_trend,
    pareto_front,
    summarize_distribution,
)
from hylo_analytics.charts.shrinkage import shrinkage
from hylo_analytics.charts.summaries import iqm_intervals, performance_profiles
from hylo_analytics.charts.trends import trend

use_safe_renderer()  # notebook outputs escape the spec as saved files do

__all__ = [
    "OUTCOME_COLORS",
    "VERDICT_COLORS",
    "calibration_intervals",
    "cost_vs_success",
    "coverage_breakdown",
    "critical_difference_diagram",
    "flip_matrix",
    "iqm_intervals",
    "metric_distribution",
    "metric_trend",
    "paired_forest",
    "pareto_front",
    "pareto_intervals",
    "pass_k_curves",
    "performance_profiles",
    "ranking_matrix",
    "save",
    "shrinkage",
    "strength_intervals",
    "success_rate_by_task",
    "summarize_distribution",
    "trend",
    "win_loss_bars",
]
