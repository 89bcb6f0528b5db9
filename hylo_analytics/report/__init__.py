"""The report stage: one self-contained HTML page comparing a candidate with its parent.

:func:`report_frames` gathers small frames from the compare and aggregate stages (no statistic
is computed here); :func:`render_report` turns them into a page; :func:`build_report` keeps
both as a :class:`ComparisonReport` for Jupyter and the console.
"""

from hylo_analytics.report.frames import (
    ComparisonReport,
    build_report,
    describe_rule,
    render_report,
    report_frames,
    run_labels,
    summary_sentence,
    write_report,
)

__all__ = [
    "ComparisonReport",
    "build_report",
    "describe_rule",
    "render_report",
    "report_frames",
    "run_labels",
    "summary_sentence",
    "write_report",
]
