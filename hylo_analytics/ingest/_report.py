"""What an ingest did, and the error ``strict=True`` raises."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

import polars as pl

from hylo_analytics.errors import InputError

__all__ = ["IngestError", "IngestReport", "Problem"]


@dataclass(frozen=True)
class Problem:
    """One rejected input item: where it is and what was wrong."""

    path: str
    line: int | None
    field: str | None
    error: str

    def __str__(self) -> str:
        where = self.path + (f":{self.line}" if self.line is not None else "")
        return f"{where}: {self.field + ': ' if self.field else ''}{self.error}"


class IngestError(InputError):
    """Raised by ``ingest(strict=True)`` on the first bad input item; nothing was stored."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(str(problem))
        self.problem = problem


@dataclass(frozen=True)
class IngestReport:
    """Counts of what one ``Store.ingest`` call read, added, skipped and quarantined."""

    files_seen: int = 0
    files_read: int = 0
    files_unchanged: int = 0
    runs_added: int = 0
    samples_added: int = 0
    events_added: int = 0
    scores_added: int = 0
    quarantined: int = 0
    problems: tuple[Problem, ...] = field(default=(), repr=False)
    formats: tuple[tuple[str, int], ...] = ()
    seconds: float = 0.0
    # (path, format chosen by content) per file read; format None = no reader recognised it
    file_formats: tuple[tuple[str, str | None], ...] = field(default=(), repr=False)

    def merge(self, other: IngestReport) -> IngestReport:
        fmt: dict[str, int] = dict(self.formats)
        for k, v in other.formats:
            fmt[k] = fmt.get(k, 0) + v
        return IngestReport(
            files_seen=self.files_seen + other.files_seen,
            files_read=self.files_read + other.files_read,
            files_unchanged=self.files_unchanged + other.files_unchanged,
            runs_added=self.runs_added + other.runs_added,
            samples_added=self.samples_added + other.samples_added,
            events_added=self.events_added + other.events_added,
            scores_added=self.scores_added + other.scores_added,
            quarantined=self.quarantined + other.quarantined,
            problems=self.problems + other.problems,
            formats=tuple(sorted(fmt.items())),
            seconds=self.seconds + other.seconds,
            file_formats=self.file_formats + other.file_formats,
        )

    def problems_frame(self) -> pl.DataFrame:
        """The quarantined items as a frame (path, line, field, error)."""
        return pl.DataFrame(
            {
                "path": [p.path for p in self.problems],
                "line": [p.line for p in self.problems],
                "field": [p.field for p in self.problems],
                "error": [p.error for p in self.problems],
            },
            schema={"path": pl.String, "line": pl.Int64, "field": pl.String, "error": pl.String},
        )

    def formats_frame(self) -> pl.DataFrame:
        """The format chosen for each file read (null: unknown format, quarantined)."""
        return pl.DataFrame(
            {
                "path": [p for p, _ in self.file_formats],
                "format": [f for _, f in self.file_formats],
            },
            schema={"path": pl.String, "format": pl.String},
        )

    def summary(self) -> str:
        fmts = ", ".join(f"{k}: {v}" for k, v in self.formats) or "none"
        return (
            f"read {self.files_read} of {self.files_seen} files "
            f"({self.files_unchanged} unchanged; formats {fmts}) in {self.seconds:.2f}s: "
            f"+{self.runs_added} runs, +{self.samples_added} samples, +{self.events_added} events, "
            f"+{self.scores_added} scores, {self.quarantined} quarantined"
        )

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  quarantined {p}" for p in self.problems[:20]]
        if len(self.problems) > 20:
            lines.append(f"  ... and {len(self.problems) - 20} more (see the quarantine table)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(p.path)}</td><td>{p.line if p.line is not None else ''}</td>"
            f"<td>{html.escape(p.field or '')}</td><td>{html.escape(p.error)}</td></tr>"
            for p in self.problems[:50]
        )
        table = (
            "<table><thead><tr><th>path</th><th>line</th><th>field</th><th>error</th></tr>"
            f"</thead><tbody>{rows}</tbody></table>"
            if rows
            else ""
        )
        return f"<div><b>IngestReport</b>: {html.escape(self.summary())}{table}</div>"
