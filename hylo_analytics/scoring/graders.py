"""Graders: external judgments (a VLM, an operator, an oracle) written into the trace.

A Scorer is pure, so historical traces can be re-scored at any time; a :class:`Grader` may
have side effects (it calls a model, asks a person), so its judgment is *recorded*: each
:func:`run_grader` appends one ``grade`` event per episode to the stored trace, and the
``grades`` scorer turns those into score rows (``source = "grade:<grader>"``) like the grades
a harness wrote itself. Re-running a grader supersedes its earlier grade events (a tombstone
with source ``grade:<name>`` on the events table) instead of adding a second judgment.

:func:`vlm_judge` is a grader around any callable client (``client(prompt=..., model=...)``,
returning the answer text): its prompt, model and raw answer are kept as the grade event's
``judge_trace``, so a judgment can be audited without calling the model again.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import pyarrow as pa

from hylo_analytics import _schema
from hylo_analytics._sql import query_sql
from hylo_analytics._traces import with_raw_sql
from hylo_analytics.errors import GraderError, InputError, InputTypeError

if TYPE_CHECKING:
    from hylo_analytics.scoring._report import ScoringReport
    from hylo_analytics.store import ParquetStore

__all__ = [
    "EpisodeTask",
    "EpisodeTrace",
    "GradeEvent",
    "Grader",
    "GraderError",
    "GradingReport",
    "VlmJudge",
    "run_grader",
    "vlm_judge",
]


@dataclass(frozen=True)
class EpisodeTrace:
    """One stored episode as a grader sees it (read-only): its trace lines as parsed JSON, in
    file order, and its sample record (the sample's columns plus its unmodelled fields)."""

    run_id: str
    episode_id: str
    events: tuple[Mapping[str, Any], ...]
    sample: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeTask:
    """The stored part of the episode's ``TaskInstance`` (the store keeps no ``TaskSpec``)."""

    task_id: str | None
    seed: int | None
    key: str | None
    epoch: int | None = None
    instruction: str | None = None  # the sample's ``instruction`` field, when the log has one


@dataclass(frozen=True)
class GradeEvent:
    """A grader's judgment of one episode: ``value`` None abstains (it counts in no mean).

    ``name`` is the metric the grade answers for; ``judge_trace`` is what the judgment was
    made from (prompt, model, raw answer), kept in the event's raw JSON.
    """

    value: float | bool | None
    name: str = "success"
    explanation: str = ""
    judge_trace: Mapping[str, Any] | None = None


@runtime_checkable
class Grader(Protocol):
    """Captures an external judgment of an episode; see :func:`run_grader`.

    ``name`` becomes the grade events' ``grader`` and the scores' ``grade:<name>`` source (a
    read-only attribute, so a frozen dataclass is a grader).
    """

    @property
    def name(self) -> str: ...

    def grade(self, trace: EpisodeTrace, task: EpisodeTask) -> GradeEvent: ...


@dataclass(frozen=True)
class GradingReport:
    """What :func:`run_grader` committed: one grade event per graded episode."""

    grader: str
    runs: tuple[str, ...]
    episodes: int  # grade events written
    abstained: int  # of which with value None
    skipped: int  # samples without an episode id: no trace a grade event could join
    batch_seq: int | None
    seconds: float
    scoring: ScoringReport | None = None  # the ``grades`` re-score of the runs, when asked

    def __str__(self) -> str:
        return (
            f"grader {self.grader}: {self.episodes} episode(s) graded in {len(self.runs)} "
            f"run(s) ({self.abstained} abstained, {self.skipped} without an episode id) "
            f"in {self.seconds:.2f} s, batch {self.batch_seq}"
        )


def _episodes_sql() -> str:
    """Each sample of the runs in ``$runs`` with its episode's event lines (the trace file
    kept once, :mod:`hylo_analytics._traces`) and last event index."""
    events = with_raw_sql(
        "select run_id, key, episode_id, idx, raw from stg_events where list_contains($runs, run_id)"
    )
    return query_sql("scoring_grader_episodes", events=events)


_GRADER_NAME = re.compile(r"[A-Za-z0-9_.:\-]+")


def run_grader(
    store: ParquetStore,
    grader: Grader,
    runs: Sequence[str] | None = None,
    *,
    rescore: bool = True,
) -> GradingReport:
    """Grade every episode of ``runs`` (default: all) and commit the grade events at once.

    The episodes are read, graded and committed under the store's writer lock: the grade
    events' line numbers follow the trace that was read, and the tombstone superseding the
    grader's earlier events covers exactly what the new ones replace. A grader that raises
    or returns a bad grade is a :class:`GraderError` naming the episode, and nothing is
    stored. ``rescore``: then re-score the runs' grades (``store.score(["grades"])``), so
    the judgments are in ``scores`` and every aggregate.
    """
    from hylo_analytics.store import as_parquet

    store = as_parquet(store)  # a Store (the facade) holds its ParquetStore
    from hylo_analytics.store import Tombstone

    name = getattr(grader, "name", None)
    if not isinstance(name, str) or not _GRADER_NAME.fullmatch(name):
        raise InputError(f"a grader needs a name of letters, digits and _.:- ; got {name!r}")
    if not callable(getattr(grader, "grade", None)):
        raise InputTypeError(f"grader {name!r} has no grade(trace, task) method")
    t0 = time.perf_counter()
    with store.lock():
        if runs is None:
            run_ids = store.sql("select run_id from stg_runs order by run_id")["run_id"].to_list()
        else:
            run_ids = store.resolve_runs(runs)
        episodes = store.sql(_episodes_sql(), {"runs": run_ids})
        rows: list[dict[str, Any]] = []
        skipped = abstained = 0
        for ep in episodes.iter_rows(named=True):  # a grader is one call per episode, by design
            if ep["episode_id"] is None:
                skipped += 1
                continue
            trace, task = _episode(ep)
            where = f"episode {ep['episode_id']!r} (run {ep['run_id']}, key {ep['key']})"
            try:
                event = grader.grade(trace, task)
            except Exception as exc:
                raise GraderError(
                    f"grader {name!r} failed on {where}: {type(exc).__name__}: {exc}; "
                    "nothing was stored"
                ) from exc
            row = _event_row(name, event, ep, where)
            abstained += row["value"] is None
            rows.append(row)
        table = _schema.conform(pa.Table.from_pylist(rows, schema=_ROW_SCHEMA), "events")
        stones = [Tombstone("events", r, f"grade:{name}") for r in run_ids]
        seq = store.commit({"events": table}, stones) if run_ids else None
    scoring = None
    if rescore and run_ids:
        from hylo_analytics.scoring import score_store

        scoring = score_store(store, ["grades"], run_ids)
    return GradingReport(
        name,
        tuple(run_ids),
        len(rows),
        abstained,
        skipped,
        seq,
        time.perf_counter() - t0,
        scoring,
    )


_ROW_SCHEMA = pa.schema([_schema.EVENTS.field(c) for c in _schema.EVENTS.names if c != "batch_seq"])


def _episode(ep: Mapping[str, Any]) -> tuple[EpisodeTrace, EpisodeTask]:
    extra = json.loads(ep["extra"]) if ep["extra"] else {}
    if not isinstance(extra, dict):
        extra = {}
    cols = ("run_id", "key", "task_id", "seed", "epoch", "episode_id", "status", "trace_status")
    sample = MappingProxyType({**extra, **{k: ep[k] for k in cols}})
    events = tuple(MappingProxyType(json.loads(r)) for r in ep["raws"] or ())
    instruction = extra.get("instruction")
    task = EpisodeTask(
        ep["task_id"],
        ep["seed"],
        ep["key"],
        ep["epoch"],
        instruction if isinstance(instruction, str) else None,
    )
    return EpisodeTrace(ep["run_id"], ep["episode_id"], events, sample), task


def _event_row(grader: str, event: Any, ep: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The events row of one grade, checked: what the grades scorer could not read is refused."""

    def bad(why: str) -> GraderError:
        return GraderError(f"grader {grader!r} on {where}: {why}; nothing was stored")

    if not isinstance(event, GradeEvent):
        raise bad(f"grade() returned {type(event).__name__}, expected a GradeEvent")
    value = event.value
    if value is not None and (
        not isinstance(value, int | float) or not math.isfinite(float(value))
    ):
        raise bad(f"value must be a finite number, a bool or None; got {value!r}")
    if not isinstance(event.name, str) or not event.name:
        raise bad(f"name must be a non-empty string; got {event.name!r}")
    raw: dict[str, Any] = {
        "type": "grade",
        "grader": grader,
        "name": event.name,
        "value": value,
        "explanation": str(event.explanation),
    }
    if event.judge_trace is not None:
        raw["judge_trace"] = dict(event.judge_trace)
    try:
        text = json.dumps(raw, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise bad(f"the grade is not JSON ({exc})") from exc
    return {
        "run_id": ep["run_id"],
        "key": ep["key"],
        "episode_id": ep["episode_id"],
        "idx": int(ep["last_idx"]) + 1,  # after the trace's last line: the grader's word is last
        "type": "grade",
        "grader": grader,
        "name": event.name,
        "value": None if value is None else float(value),
        "explanation": raw["explanation"],
        "raw": text,
    }


# -- vlm_judge ----------------------------------------------------------------------------

_FIELD = re.compile(r"\{(task_id|key|seed|epoch|episode_id|status|instruction|output|events)\}")
_MAX_EVENTS_CHARS = 20_000

DEFAULT_PROMPT = (
    "You are judging whether a robot or agent episode succeeded.\n"
    "Task: {task_id} (seed {seed}). Instruction: {instruction}\n"
    "Episode status: {status}\nTrace events (JSON lines):\n{events}\n"
    'Answer with JSON: {"value": 1 for success or 0 for failure, "explanation": "..."}'
)


def _render(prompt: str, trace: EpisodeTrace, task: EpisodeTask) -> str:
    """``prompt`` with its known ``{field}``s filled in; other braces are left as written."""
    events = "\n".join(json.dumps(dict(e), ensure_ascii=False) for e in trace.events)
    if len(events) > _MAX_EVENTS_CHARS:
        events = events[:_MAX_EVENTS_CHARS] + "\n... (truncated)"
    output = trace.sample.get("output")
    values = {
        "task_id": task.task_id,
        "key": task.key,
        "seed": task.seed,
        "epoch": task.epoch,
        "episode_id": trace.episode_id,
        "status": trace.sample.get("status"),
        "instruction": task.instruction or "",
        "output": output if isinstance(output, str) else json.dumps(output),
        "events": events,
    }
    return _FIELD.sub(lambda m: "" if values[m[1]] is None else str(values[m[1]]), prompt)


_WORDS = {"yes": 1.0, "pass": 1.0, "success": 1.0, "true": 1.0,
          "no": 0.0, "fail": 0.0, "failure": 0.0, "false": 0.0}  # fmt: skip
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_answer(answer: str) -> tuple[float | None, str]:
    """A judge's answer text -> (value, explanation); an answer it cannot read abstains.

    Read, in order: a JSON object with ``value`` (and ``explanation``), anywhere in the text;
    a bare number; a leading yes/no, pass/fail, success/failure, true/false.
    """
    found = _JSON_OBJECT.search(answer)
    if found:
        try:
            obj = json.loads(found[0])
        except ValueError:
            obj = None
        if isinstance(obj, dict) and "value" in obj:
            v = obj["value"]
            why = str(obj.get("explanation", ""))
            if v is None:
                return None, why or "the judge abstained"
            if isinstance(v, bool):
                return float(v), why
            if isinstance(v, int | float) and math.isfinite(v):
                return float(v), why
    text = answer.strip()
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None and math.isfinite(number):
        return number, ""
    first = re.match(r"[A-Za-z]+", text)
    if first and first[0].lower() in _WORDS:
        return _WORDS[first[0].lower()], text
    return None, f"unreadable judge answer: {text[:200]!r}"


@dataclass(frozen=True)
class VlmJudge:
    """A :class:`Grader` asking ``client(prompt=..., model=...)`` for a judgment (a string).

    ``metric`` is the grade's name (the metric it answers for); ``parse`` turns the answer
    text into (value, explanation), :func:`parse_answer` by default.
    """

    client: Callable[..., Any]
    prompt: str = DEFAULT_PROMPT
    model: str = ""
    name: str = "vlm_judge"
    metric: str = "success"
    parse: Callable[[str], tuple[float | None, str]] = parse_answer

    def grade(self, trace: EpisodeTrace, task: EpisodeTask) -> GradeEvent:
        rendered = _render(self.prompt, trace, task)
        answer = self.client(prompt=rendered, model=self.model)
        if not isinstance(answer, str):
            raise InputTypeError(
                f"the client returned {type(answer).__name__}, expected the answer text"
            )
        value, explanation = self.parse(answer)
        return GradeEvent(
            value,
            self.metric,
            explanation,
            {"model": self.model, "prompt": rendered, "answer": answer},
        )


def vlm_judge(
    client: Callable[..., Any],
    *,
    prompt: str = DEFAULT_PROMPT,
    model: str = "",
    name: str = "vlm_judge",
    metric: str = "success",
    parse: Callable[[str], tuple[float | None, str]] = parse_answer,
) -> VlmJudge:
    """A grader that asks a VLM (any callable ``client(prompt=..., model=...) -> str``).

    ``prompt`` may name ``{task_id}``, ``{key}``, ``{seed}``, ``{epoch}``, ``{episode_id}``,
    ``{status}``, ``{instruction}``, ``{output}`` and ``{events}`` (the trace as JSON lines);
    any other brace is kept as written, so a JSON example in the prompt needs no escaping.
    """
    return VlmJudge(client, prompt, model, name, metric, parse)
