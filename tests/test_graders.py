"""Graders over stored traces: grade events committed to a real store, read back as scores."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scoring_data import RUN, TRACES, write_run

import hylo_analytics as ha
from hylo_analytics.scoring import graders
from hylo_analytics.scoring.graders import parse_answer


@pytest.fixture()
def store(tmp_path: Path) -> ha.Store:
    write_run(tmp_path / "data")
    st = ha.open_store(tmp_path / "store")
    st.ingest(tmp_path / "data", progress=False)
    return st


class Client:
    """A deterministic local 'VLM': success for task t1, failure otherwise; counts its calls."""

    def __init__(self, answers: dict[str, str] | None = None) -> None:
        self.prompts: list[str] = []
        self.answers = answers or {"t1": '{"value": 1, "explanation": "placed"}', "t2": "No."}

    def __call__(self, *, prompt: str, model: str) -> str:
        assert model == "local-judge-1"
        self.prompts.append(prompt)
        task = prompt.split("task=")[1].split(";")[0]
        return self.answers.get(task, "I cannot tell")


PROMPT = 'task={task_id}; seed={seed}; status={status}; say {"value": 0|1}\n{events}'


def _grade_scores(store: ha.Store, source: str) -> dict[str, tuple[float | None, str | None]]:
    df = store.sql(
        "select key, value, skip_reason from stg_scores where source = ? order by key", [source]
    )
    return {r[0]: (r[1], r[2]) for r in df.rows()}


def _grade_events(store: ha.Store, grader: str) -> list[dict[str, Any]]:
    df = store.sql(
        "select key, idx, value, raw from stg_events where type = 'grade' and grader = ? "
        "order by key",
        [grader],
    )
    return list(df.iter_rows(named=True))


@pytest.mark.slow
def test_vlm_judge_grades_become_scores(store: ha.Store, tmp_path: Path) -> None:
    client = Client()
    judge = ha.vlm_judge(client, prompt=PROMPT, model="local-judge-1", name="judge")
    assert isinstance(judge, ha.Grader)
    report = store.grade(judge)
    assert (report.episodes, report.abstained, report.skipped) == (len(TRACES), 2, 0)
    assert len(client.prompts) == len(TRACES)
    # read back by a fresh process-like open, through the default scorers (grades included)
    fresh = ha.open_store(tmp_path / "store", create=False)
    fresh.score()
    expected = {
        "t1#1": (1.0, None),
        "t1#2": (1.0, None),
        "t1#3": (1.0, None),
        "t2#1": (0.0, None),
        "t2#2": (0.0, None),
        "t2#3": (0.0, None),
        "t2#4": (0.0, None),
        "t3#1": (None, "grader abstained"),
        "t3#2": (None, "grader abstained"),
    }
    assert _grade_scores(fresh, "grade:judge") == expected
    agg = fresh.sql(
        "select avg(value) from stg_scores where source = 'grade:judge' and metric = 'success'"
    ).item()
    assert agg == pytest.approx(3 / 7)


@pytest.mark.slow
def test_judge_trace_keeps_prompt_model_and_answer(store: ha.Store) -> None:
    store.grade(ha.vlm_judge(Client(), prompt=PROMPT, model="local-judge-1", name="judge"))
    events = {e["key"]: e for e in _grade_events(store, "judge")}
    raw = json.loads(events["t1#1"]["raw"])
    trace = raw["judge_trace"]
    assert trace["model"] == "local-judge-1"
    assert trace["answer"] == '{"value": 1, "explanation": "placed"}'
    # the prompt as sent: fields filled, the trace's lines in it, the JSON example kept
    assert trace["prompt"].startswith('task=t1; seed=1; status=failure; say {"value": 0|1}\n')
    assert '"reason": "workspace_limit"' in trace["prompt"]
    assert raw["explanation"] == "placed" and raw["value"] == 1.0
    unreadable = json.loads(events["t3#1"]["raw"])
    assert unreadable["value"] is None
    assert unreadable["explanation"] == "unreadable judge answer: 'I cannot tell'"
    # appended after the trace's last line, so the grades scorer takes it as the last word
    assert events["t1#1"]["idx"] == len(TRACES["t1#1"]) + 1  # type: ignore[arg-type]
    assert events["t2#3"]["idx"] == 1  # no trace: the first line


@pytest.mark.slow
def test_rerun_replaces_and_does_not_duplicate(store: ha.Store) -> None:
    def judge(answers: dict[str, str] | None = None) -> ha.Grader:
        return ha.vlm_judge(Client(answers), prompt=PROMPT, model="local-judge-1", name="judge")

    store.grade(judge())
    n_events = store.sql("select count(*) from stg_events").item()
    store.grade(judge({"t1": "no", "t2": "yes", "t3": "0.5"}))
    assert store.sql("select count(*) from stg_events").item() == n_events
    assert len(_grade_events(store, "judge")) == len(TRACES)
    scores = _grade_scores(store, "grade:judge")
    assert len(scores) == len(TRACES)
    assert scores["t1#1"] == (0.0, None) and scores["t2#3"] == (1.0, None)
    assert scores["t3#2"] == (0.5, None)
    n = store.sql("select count(*) from stg_scores where source = 'grade:judge'").item()
    assert n == len(TRACES)


@pytest.mark.slow
def test_rerun_supersedes_only_that_graders_events(store: ha.Store) -> None:
    before = store.sql(
        "select type, grader, count(*) as n from stg_events group by all order by all"
    ).rows()
    # the trace holds the harness's own vlm_judge grades (t1#2's last word: an abstention)
    store.grade(ha.vlm_judge(Client(), prompt=PROMPT, model="local-judge-1"))
    after = store.sql(
        "select type, grader, count(*) as n from stg_events group by all order by all"
    ).rows()
    other = [r for r in before if r[1] != "vlm_judge"]
    assert [r for r in after if r[1] != "vlm_judge"] == other  # steps, ends, operator kept
    assert ("grade", "vlm_judge", len(TRACES)) in after
    scores = _grade_scores(store, "grade:vlm_judge")
    assert scores["t1#2"] == (1.0, None)  # the re-run judgment, not the trace's abstention
    assert _grade_scores(store, "grade:operator") == {"t1#2": (1.0, None)}


def test_a_client_that_raises_names_the_episode_and_stores_nothing(store: ha.Store) -> None:
    seen: list[str] = []

    def flaky(*, prompt: str, model: str) -> str:
        seen.append(prompt)
        if len(seen) == 3:
            raise ConnectionError("judge endpoint unreachable")
        return "yes"

    version = store.data_version()
    events = store.sql("select count(*) from stg_events").item()
    with pytest.raises(graders.GraderError) as err:
        store.grade(ha.vlm_judge(flaky, prompt=PROMPT, model="m", name="judge"))
    message = str(err.value)
    assert f"episode '{RUN}-ep2'" in message and "key t1#3" in message
    assert "ConnectionError: judge endpoint unreachable" in message
    assert "nothing was stored" in message
    assert store.data_version() == version
    assert store.sql("select count(*) from stg_events").item() == events
    assert _grade_events(store, "judge") == []


@dataclass(frozen=True)
class Operator:
    """A grader of our own: the Grader protocol, no vlm_judge."""

    name: str
    value: Any

    def grade(self, trace: graders.EpisodeTrace, task: graders.EpisodeTask) -> Any:
        if task.key == "t1#2":
            return self.value
        n_steps = sum(e.get("type") == "step" for e in trace.events)
        return ha.GradeEvent(n_steps > 1, name="operator_ok", explanation=f"{n_steps} steps")


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (ha.GradeEvent(math.nan), "value must be a finite number, a bool or None; got nan"),
        (ha.GradeEvent("good"), "value must be a finite number, a bool or None; got 'good'"),  # type: ignore[arg-type]
        (0.5, "grade() returned float, expected a GradeEvent"),
        (ha.GradeEvent(1.0, judge_trace={"x": object()}), "the grade is not JSON"),
    ],
)
@pytest.mark.slow
def test_a_bad_grade_is_refused_with_the_episode(store: ha.Store, value: Any, why: str) -> None:
    version = store.data_version()
    with pytest.raises(graders.GraderError, match="grader 'op' on episode") as err:
        store.grade(Operator("op", value))
    assert why in str(err.value) and "key t1#2" in str(err.value)
    assert store.data_version() == version


@pytest.mark.slow
def test_a_custom_grader_with_booleans_and_its_own_metric(store: ha.Store) -> None:
    report = graders.run_grader(store, Operator("op", ha.GradeEvent(None)), [RUN])
    assert report.scoring is not None and report.runs == (RUN,)
    rows = store.sql(
        "select key, metric, value, explanation from stg_scores where source = 'grade:op' "
        "order by key"
    ).rows()
    assert rows[0] == ("t1#1", "operator_ok", 1.0, "2 steps")
    assert ("t1#2", "success", None, "") in rows
    assert ("t3#2", "operator_ok", 0.0, "0 steps") in rows


def test_a_grader_needs_a_usable_name(store: ha.Store) -> None:
    with pytest.raises(ValueError, match="a grader needs a name"):
        store.grade(Operator("two words", None))


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ('Sure. {"value": 0, "explanation": "dropped it"}', (0.0, "dropped it")),
        ('{"value": true}', (1.0, "")),
        ('{"value": null, "explanation": "occluded"}', (None, "occluded")),
        (" 0.75 ", (0.75, "")),
        ("Yes, the block is on the plate", (1.0, "Yes, the block is on the plate")),
        ("FAIL", (0.0, "FAIL")),
        ("nan", (None, "unreadable judge answer: 'nan'")),
        ("maybe", (None, "unreadable judge answer: 'maybe'")),
    ],
)
def test_parse_answer(answer: str, expected: tuple[float | None, str]) -> None:
    assert parse_answer(answer) == expected


@pytest.mark.slow
def test_grading_one_run_leaves_the_others_grades(tmp_path: Path) -> None:
    write_run(tmp_path / "data", RUN)
    write_run(tmp_path / "data", "run-hand-0002")
    st = ha.open_store(tmp_path / "store")
    st.ingest(tmp_path / "data", progress=False)
    judge = ha.vlm_judge(Client(), prompt=PROMPT, model="local-judge-1", name="judge")
    st.grade(judge, ["run-hand-0002"])
    st.grade(judge, [RUN])
    st.grade(judge, [RUN])  # a re-run of one run: the other's judgments stay
    per_run = st.sql(
        "select run_id, count(*) from stg_events where grader = 'judge' group by 1 order by 1"
    ).rows()
    assert per_run == [(RUN, len(TRACES)), ("run-hand-0002", len(TRACES))]
    per_run = st.sql(
        "select run_id, count(*) from stg_scores where source = 'grade:judge' group by 1 order by 1"
    ).rows()
    assert per_run == [(RUN, len(TRACES)), ("run-hand-0002", len(TRACES))]


@pytest.mark.slow
def test_a_regrade_reads_the_same_after_compaction(store: ha.Store) -> None:
    judge = ha.vlm_judge(Client(), prompt=PROMPT, model="local-judge-1", name="judge")
    store.grade(judge)
    store.grade(judge)
    query = "select key, idx, value from stg_events where type = 'grade' order by all"
    before = store.sql(query).rows()
    with store.parquet.lock():
        store.parquet.compact()
    assert store.sql(query).rows() == before
    assert len(_grade_events(store, "judge")) == len(TRACES)
