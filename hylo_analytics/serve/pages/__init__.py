"""Server-rendered HTML for each view: f-strings over frames, every value escaped.

The pages only lay out what the readers return (``_data``); they compute no statistic. Each
link is a stable URL of query parameters, so a page can be shared as it is. One module per
page family: ``_runs``, ``_compare`` (a comparison, a pooled one, a task's pairs),
``_episode``, ``_rank`` (the ranking); ``_layout`` is the frame they share.
"""

from __future__ import annotations

from hylo_analytics.serve.pages._calibrate import calibrate_page, calibrate_refused
from hylo_analytics.serve.pages._cd import cd_page, cd_refused
from hylo_analytics.serve.pages._compare import comparison_page, pooled_page, task_page
from hylo_analytics.serve.pages._episode import episode_page
from hylo_analytics.serve.pages._layout import error_page, url
from hylo_analytics.serve.pages._pareto import pareto_choose, pareto_page, pareto_refused
from hylo_analytics.serve.pages._rank import ranking_page, ranking_pending, ranking_refused
from hylo_analytics.serve.pages._runs import runs_page
from hylo_analytics.serve.pages._shrink import shrink_page

__all__ = [
    "calibrate_page",
    "calibrate_refused",
    "cd_page",
    "cd_refused",
    "comparison_page",
    "episode_page",
    "error_page",
    "pareto_choose",
    "pareto_page",
    "pareto_refused",
    "pooled_page",
    "ranking_page",
    "ranking_pending",
    "ranking_refused",
    "runs_page",
    "shrink_page",
    "task_page",
    "url",
]
