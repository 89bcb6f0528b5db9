"""What a scoring pass did: rows per scorer, abstentions, errors and failed runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from hylo_analytics._html import text

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ScorerSummary", "ScoringError", "ScoringReport"]


@dataclass(frozen=True)
class ScorerSummary:
    """Counts for one scorer (one ``source``) over the scored runs."""

    source: str
    optional: bool
    rows: int
    valid: int
    abstained: int
    errors: int
    seconds: float


@dataclass(frozen=True)
class ScoringError:
    """One row a scorer could not score: where, and why."""

    source: str
    run_id: str
    key: str
    reason: str


@dataclass(frozen=True)
class ScoringReport:
    """The outcome of :func:`score_store`.

    ``failed_runs`` maps a run to the required scorers that errored on it; optional scorers'
    errors are counted and listed but fail nothing. Nothing raises halfway: every row, error
    rows included, is committed.
    """

    runs: tuple[str, ...]
    scorers: tuple[ScorerSummary, ...]
    failed_runs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    errors: tuple[ScoringError, ...] = ()  # the first few, for display
    rows_written: int = 0
    batch_seq: int | None = None
    seconds: float = 0.0
    # the score rows computed (as the scores table holds them); None when not kept
    rows: pa.Table | None = field(default=None, repr=False, compare=False)
    # runs with no trace at all: the built-in scorers left them (and their logged scores) alone
    untraced_runs: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "failed_runs", MappingProxyType(dict(self.failed_runs)))

    @property
    def ok(self) -> bool:
        """No required scorer errored on any run."""
        return not self.failed_runs

    def __str__(self) -> str:
        head = (
            f"ScoringReport: {len(self.runs)} runs, {len(self.scorers)} scorers, "
            f"{self.rows_written} rows in {self.seconds:.2f}s"
            + ("" if self.ok else f"; {len(self.failed_runs)} runs FAILED")
        )
        lines = [head]
        w = max([len(s.source) for s in self.scorers] + [6])
        lines.append(f"  {'source':<{w}} {'rows':>8} {'valid':>8} {'abstain':>8} {'errors':>7}")
        for s in self.scorers:
            opt = " (optional)" if s.optional else ""
            lines.append(
                f"  {s.source:<{w}} {s.rows:>8} {s.valid:>8} {s.abstained:>8} {s.errors:>7}{opt}"
            )
        for run, srcs in sorted(self.failed_runs.items()):
            lines.append(f"  run {run} failed: required scorer errors in {', '.join(srcs)}")
        if self.untraced_runs:
            lines.append(
                f"  {len(self.untraced_runs)} run(s) have no traces: the built-in scorers left "
                "them and their logged scores alone"
            )
        lines.extend(f"  error {e.source} {e.run_id} {e.key}: {e.reason}" for e in self.errors[:5])
        n_errors = sum(s.errors for s in self.scorers)
        if n_errors > 5:
            lines.append(f"  ... {n_errors - 5} more error rows (skip_reason in stg_scores)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{text(s.source)}{' (optional)' if s.optional else ''}</td>"
            f"<td>{s.rows}</td><td>{s.valid}</td><td>{s.abstained}</td><td>{s.errors}</td></tr>"
            for s in self.scorers
        )
        failed = "".join(
            f"<li>run {text(r)} failed: {text(', '.join(s))}</li>"
            for r, s in sorted(self.failed_runs.items())
        )
        return (
            f"<p><b>ScoringReport</b>: {len(self.runs)} runs, {self.rows_written} rows, "
            f"{self.seconds:.2f}s</p><table><tr><th>source</th><th>rows</th><th>valid</th>"
            f"<th>abstained</th><th>errors</th></tr>{rows}</table>"
            + (f"<ul>{failed}</ul>" if failed else "")
            + (
                f"<p>{len(self.untraced_runs)} run(s) have no traces: the built-in scorers "
                "left them and their logged scores alone.</p>"
                if self.untraced_runs
                else ""
            )
        )
