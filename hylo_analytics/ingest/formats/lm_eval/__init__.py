"""lm-evaluation-harness: the results JSON of a run and its ``--log_samples`` files.

* **results** ``results_<date>.json`` (lm-eval >= 0.4): ``{results: {<task>: {"<metric>,
  <filter>": value, "<metric>_stderr,<filter>": value | "N/A", sample_len, ...}}, groups,
  group_subtasks, configs, versions, n-shot, higher_is_better, n-samples: {<task>: {original,
  effective}}, config: {model, model_args, ...}, model_name, date, ...}``; and the 2022 layout
  (``results`` a list of ``{task_name, prompt_name, <metric>: value}``, ``config.model_args``
  a string), task ``<task_name>/<prompt_name>``.
* **samples** ``samples_<task>_<date>.jsonl`` (:mod:`._samples`) beside it.

The results file is the run: ``run_id`` = ``lm-eval:<model>:<date>:<sha256[:12]>``, the
model (``model_name``, else ``config.model_args`` ``pretrained``, else ``config.model``)
its agent, each task (not a group: its row is the subtasks' figure, kept in ``results``) a
``task_id``. A task with its samples file has a sample per document, ``key`` =
``<task>#<doc_id>`` (two models' samples of a task pair on the document), and a score per
metric and filter, ``<metric>,<filter>`` as the results file names it, from each line whose
value is a number (a metric the task config aggregates other than by its mean, and a corpus
metric whose per-sample value is a list, take the results file's figure instead). A task
without one has its figures (:mod:`hylo_analytics.ingest._counted`): a rate over the
task's ``n-samples.effective`` documents as counted rows (``acc,none`` 0.45 of 20: 9 of
20), any other figure as one summary row: the results file's own number is what
``aggregate`` shows either way; its samples pair, its figures do not.

The samples file is the run's companion (recorded, read with it: a changed samples file
makes the next ingest read its results again); one whose results file is not there is a run
of its own (the model from its folder, lm-eval's ``<model_name_sanitized>/``). A bad samples
file is quarantined with its lines and its run stored from the figures, marked partial so
the next ingest reads it again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from hylo_analytics.ingest._common import load_json_docs
from hylo_analytics.ingest._files import SourceFile, read_files
from hylo_analytics.ingest._reader import SNIFF_BYTES, Parsed, Reader
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.formats.lm_eval._rows import build_rows
from hylo_analytics.ingest.formats.lm_eval._samples import (
    parse_samples,
    results_name,
    samples_name,
    sniff_samples,
)
from hylo_analytics.ingest.traces import name_surrogates

__all__ = ["READERS", "RESULTS_FORMAT", "SAMPLES_FORMAT", "agent_of", "parse", "sniff_results"]

RESULTS_FORMAT = "lm-eval/results"
SAMPLES_FORMAT = "lm-eval/samples"


def sniff_results(head: bytes, path: Path | None = None) -> bool:
    """A JSON object whose ``results`` hold ``"<metric>,<filter>"`` figures (current) or
    ``task_name`` / ``prompt_name`` records (2022)."""
    h = head.lstrip()
    if not (h.startswith(b"{") and b'"results"' in h):
        return False
    return b',none"' in h or b"_stderr," in h or (b'"task_name"' in h and b'"prompt_name"' in h)


def agent_of(model_name: object, model_args: object, model: object) -> tuple[str, str]:
    """``(agent, where from)``: ``model_name``, else ``pretrained`` of ``model_args`` (an
    object, or the string ``"pretrained=gpt2,dtype=..."``), else ``model``."""
    if isinstance(model_name, str) and model_name:
        return model_name, "model_name"
    args: Any = model_args
    if isinstance(args, str):
        args = dict(p.split("=", 1) for p in args.split(",") if "=" in p)
    if isinstance(args, dict) and isinstance(args.get("pretrained"), str):
        return args["pretrained"], "config.model_args.pretrained"
    return (model if isinstance(model, str) and model else "unknown"), "config.model"


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """Results files with their samples, and samples files, of a batch."""
    is_samples = [sniff_samples(f.data[:SNIFF_BYTES], f.path) for f in files]
    res = [i for i, s in enumerate(is_samples) if not s]
    good, problems = load_json_docs(con, "_lm", [files[i] for i in res])
    problems = name_surrogates(problems, {str(files[i].path): files[i].data for i in res})
    problems += _shape_problems(con, [files[i] for i in res])
    good = [g for g in good if str(files[res[g]].path) not in {p.path for p in problems}]
    ids = _results_ids(con, [files[i] for i in res], good)  # local results idx -> (run, agent)
    plan = _Plan(files, res, ids)
    sample_files = plan.sample_files()
    bad_s, more = parse_samples(con, sample_files)
    problems += more
    return plan.rows(con, bad_s, problems)


def _shape_problems(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> list[Problem]:
    out = []
    for fi, kind in con.execute(
        """SELECT file_idx, coalesce(json_type(raw, '$.results'), 'nothing') FROM _lm
           WHERE coalesce(json_type(raw, '$.results'), 'NULL') NOT IN ('OBJECT', 'ARRAY')
           ORDER BY 1"""
    ).fetchall():
        why = f"expected an object of tasks (or a list of records), got {kind.lower()}"
        out.append(Problem(str(files[fi].path), None, "results", why))
    return out


def _results_ids(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], good: list[int]
) -> dict[int, tuple[str, str, str]]:
    """Each good results file's ``(run_id, agent, where the agent came from)``."""
    rows = con.execute(
        """SELECT file_idx, raw ->> '$.model_name', CAST(json_extract(raw, '$.config.model_args')
                  AS VARCHAR), raw ->> '$.config.model' FROM _lm ORDER BY 1"""
    ).fetchall()
    out = {}
    for fi, name, args, model in rows:
        if fi in good:
            parsed = json.loads(args) if args else None
            out[fi] = _run_id(files[fi], *agent_of(name, parsed, model))
    return out


def _run_id(sf: SourceFile, agent: str, source: str) -> tuple[str, str, str]:
    named = results_name(sf.path)
    date = f":{named[1]}" if named else ""
    return f"lm-eval:{agent}{date}:{sf.sha256[:12]}", agent, source


class _Plan:
    """Which samples files belong to which run: the companions of the batch's results files
    (from the batch or the disk), the batch's samples files with their results on disk, and
    the orphans (a run each)."""

    def __init__(
        self, files: Sequence[SourceFile], res: list[int], ids: dict[int, tuple[str, str, str]]
    ) -> None:
        self.files, self.res, self.ids = files, res, ids
        in_batch = {str(f.path): i for i, f in enumerate(files)}
        self.samples: list[SourceFile] = []
        self.owner: list[int | None] = []  # per sample file: the batch idx of its results
        self.batch_idx: list[int | None] = []  # per sample file: its batch idx, if in it
        self.task: list[str] = []
        self.read_here: list[SourceFile] = []  # the samples files read from disk, not the batch
        self.outside_owner: dict[int, str | None] = {}  # batch samples idx -> owner run id
        seen: set[str] = set()
        for local in ids:
            bi = res[local]
            path = files[bi].path
            named = results_name(path)
            if named is None:
                continue
            prefix, date = named
            for sibling in sorted(
                path.parent.glob(f"{_glob(prefix)}samples_*_{_glob(date)}.jsonl")
            ):
                sn = samples_name(sibling)
                if sn is None or (sn[0], sn[2]) != (prefix, date) or str(sibling) in seen:
                    continue
                seen.add(str(sibling))
                at = in_batch.get(str(sibling))
                sf = (
                    files[at]
                    if at is not None
                    else next(read_files([sibling], roots=[path.parent]))
                )
                if at is None:
                    self.read_here.append(sf)
                if sf.error is None:
                    self._add(sf, bi, at, sn[1])
        for i, sf in enumerate(files):
            sn = samples_name(sf.path) if i not in res else None
            if i in res or str(sf.path) in seen:
                continue
            owner = sf.path.parent / f"{sn[0]}results_{sn[2]}.json" if sn is not None else None
            if owner is not None and str(owner) in in_batch:
                self.outside_owner[i] = None  # its results file is rejected: read again with it
                continue
            if owner is not None and owner.is_file():
                self.outside_owner[i] = _owner_id(owner)
            self._add(sf, None, i, sn[1] if sn else sf.path.stem)

    def _add(self, sf: SourceFile, owner: int | None, at: int | None, task: str) -> None:
        self.samples.append(sf)
        self.owner.append(owner)
        self.batch_idx.append(at)
        self.task.append(task)

    def sample_files(self) -> list[SourceFile]:
        return self.samples

    def rows(
        self, con: duckdb.DuckDBPyConnection, bad_s: set[int], problems: list[Problem]
    ) -> Parsed:
        """The runs (results, and orphan samples files), their samples and scores."""
        return build_rows(con, self, bad_s, problems)


def _glob(text: str) -> str:
    """``text`` as a literal in a glob pattern."""
    return "".join(f"[{c}]" if c in "*?[]" else c for c in text)


def _owner_id(path: Path) -> str | None:
    """The run id of a results file on disk (for its samples file's record), or None."""
    sf = next(read_files([path], roots=[path.parent]))
    try:
        doc = json.loads(sf.data) if sf.error is None else None
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    config: dict[str, Any] = doc["config"] if isinstance(doc.get("config"), dict) else {}
    agent = agent_of(doc.get("model_name"), config.get("model_args"), config.get("model"))
    return _run_id(sf, *agent)[0]


READERS = (
    Reader(RESULTS_FORMAT, sniff_results, parse),
    Reader(SAMPLES_FORMAT, sniff_samples, parse),
)
