"""The hostile-input corpus (``hostile.py``): no kind ends the ingest, loses a good row or
poisons the store, and every rejection names the culprit with the reason.

The kinds run in child processes (one for the light kinds, one per heavy kind), so a crash or
a hang is recorded against its kind. Invariants checked on every kind:

- the ingest returned (no exception, no crash, no hang);
- the good run beside the culprit is stored whole (its samples and its trace events);
- the culprit is named by a problem (its path, or its path in the message) whose message says
  what is wrong (``Kind.message``), or, for acceptable input, it is stored whole;
- every table still reads whole (a store cannot be poisoned), no score is non-finite;
- a second ingest of the same folder adds nothing: no run, no quarantine row;
- the heavy kinds (zip bombs) stay under 1.5 GB of peak memory.

Then every kind's folder is ingested together, in one call, into one store, and every view
answers.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import hostile
import pytest
from _inspect_logs import shared_logs

# the corpus (a child process per kind, ingested twice each) takes minutes: every test here
pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
PEAK_LIMIT = 1_500_000_000


def _run_children(work: Path, ctx: hostile.Ctx, names: list[str], timeout: float) -> dict[str, Any]:
    """Run ``names`` in a child, restarting it after a crash or a hang; records by kind."""
    records: dict[str, Any] = {}
    todo = list(names)
    ctx_json = json.dumps({k: str(v) for k, v in vars(ctx).items()})
    while todo:
        with subprocess.Popen(
            [sys.executable, "-W", "ignore", str(HERE / "hostile.py"), str(work), ctx_json, *todo],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        ) as child:
            got = _follow(child, timeout)
        if not got:  # died or hung before its first kind began
            got = {todo[0]: {"crashed": f"the child gave no answer (exit {child.returncode})"}}
        records.update(got)
        todo = [n for n in todo if n not in records]
    return records


def _follow(child: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """The records a child printed; the kind it was in when it crashed or hung, as such."""
    records: dict[str, Any] = {}
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert child.stdout is not None
        for line in child.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    current = None
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            child.kill()
            if current is not None:
                records[current] = {"hung": f"no answer in {timeout:.0f} s"}
            return records
        if line is None:
            child.wait()
            if current is not None:
                err = (child.stderr.read() if child.stderr else "")[-400:]
                records[current] = {"crashed": f"exit {child.returncode}: {err}"}
            return records
        msg = json.loads(line)
        if "start" in msg:
            current = msg["start"]
        else:
            records[msg["kind"]] = msg
            current = None


@pytest.fixture(scope="module")
def ctx(tmp_path_factory: pytest.TempPathFactory, real_dir: Path) -> hostile.Ctx:
    logs = shared_logs(tmp_path_factory)
    return hostile.Ctx(
        inspect_eval=logs["ok_eval"],
        inspect_json=logs["ok_json"],
        robots=real_dir / "inspect-robots" / "adhoc_2cc4c3a8.success.json",
        vla=real_dir / "vla-eval-harness" / "pi05_libero_goal.json",
        lerobot=real_dir / "lerobot" / (
            "2021147571__smolvla-libero-100k-reproduction__results__full400_h1__"
            "parent_spatial_eval_info.json"),
        lm_results=real_dir / "lm-eval" / (
            "EleutherAI__lm-evaluation-harness__outputs__qwen3-8b__negotiationtom__Qwen__"
            "Qwen3-8B__results_2026-07-08T16-04-34.219874.json"),
        lm_samples=real_dir / "lm-eval" / (
            "EleutherAI__lm-evaluation-harness__outputs__qwen3-8b__negotiationtom__Qwen__"
            "Qwen3-8B__samples_negotiationtom_intention_2026-07-08T16-04-34.219874.jsonl"),
        eee_aggregate=real_dir / "every_eval_ever" / (
            "data__global-mmlu-lite__google__gemma-3-4b-it__"
            "548f8e83-3e97-4cb4-83ac-8da11d8f3e5f.json"),
        eee_instances=real_dir / "every_eval_ever" / (
            "instance_level_data__ai2_arc_ollama_qwen2.5-0.5b_"
            "2e4e64ca-5622-42d3-9ef1-0f4e4475cdf7.Format.jsonl"),
    )  # fmt: skip


@pytest.fixture(scope="module")
def corpus(
    tmp_path_factory: pytest.TempPathFactory, ctx: hostile.Ctx
) -> tuple[Path, dict[str, Any]]:
    work = tmp_path_factory.mktemp("hostile")
    light = [k.name for k in hostile.KINDS if not k.heavy]
    records = _run_children(work, ctx, light, timeout=120)
    for k in hostile.KINDS:
        if k.heavy:
            records.update(_run_children(work, ctx, [k.name], timeout=300))
    table = [f"{'kind':45} | outcome"]
    for k in hostile.KINDS:
        r = records[k.name]
        table.append(f"{k.name:45} | {_outcome(k, r)}")
    (work / "table.txt").write_text("\n".join(table) + "\n")
    return work, records


def test_the_corpus_has_forty_kinds_across_every_reader() -> None:
    readers = {k.reader for k in hostile.KINDS}
    assert len(hostile.KINDS) >= 40
    assert {"hylo", "trace", "files", "inspect-eval", "inspect-json", "inspect-robots"} <= readers
    assert {"vla-eval", "metric-results"} <= readers
    assert {"lerobot", "lm-eval", "vla-eval-export", "every-eval-ever"} <= readers
    assert len({k.name for k in hostile.KINDS}) == len(hostile.KINDS)


def _culprit_problems(kind: hostile.Kind, record: dict[str, Any]) -> list[list[Any]]:
    culprit = record["culprit"]
    return [p for p in record.get("problems", []) if p[0] == culprit or culprit in p[3]]


def _outcome(kind: hostile.Kind, record: dict[str, Any]) -> str:
    for bad in ("hung", "crashed", "raised"):
        if bad in record:
            return f"{bad.upper()}: {record[bad]}"
    named = _culprit_problems(kind, record)
    if named:
        p = named[0]
        where = f"line {p[1]}" if p[1] is not None else ""
        where += f", field {p[2]}" if p[2] else ""
        return f"quarantined ({where.strip(', ') or 'file'}): {p[3][:140]}"
    reasons = record.get("culprit_skip_reasons") or []
    abstained = f", abstaining: {reasons[0]}" if kind.abstains and reasons else ""
    return f"stored ({record.get('culprit_samples')} samples of the culprit{abstained})"


@pytest.mark.parametrize("kind", hostile.KINDS, ids=[k.name for k in hostile.KINDS])
def test_kind(kind: hostile.Kind, corpus: tuple[Path, dict[str, Any]]) -> None:
    _, records = corpus
    r = records[kind.name]
    for bad in ("hung", "crashed", "raised"):
        assert bad not in r, f"{kind.name}: the ingest {bad}: {r[bad]}"
    assert r["bad_views"] == [], f"{kind.name}: the store is poisoned: {r['bad_views']}"
    assert r["good_samples"] == hostile.N_GOOD, f"{kind.name}: the good run lost samples"
    assert r["good_events"] > 0, f"{kind.name}: the good run lost its trace events"
    assert r["nonfinite"] == 0, f"{kind.name}: a non-finite score was stored"
    every = r["problems"]
    assert all(p[0] for p in every), f"{kind.name}: a problem names no file: {every}"
    named = _culprit_problems(kind, r)
    if kind.message is None:
        assert named == [], f"{kind.name}: acceptable input was refused: {named}"
        if kind.kept is not None:
            assert r["culprit_samples"] == kind.kept, f"{kind.name}: acceptable input not stored"
    else:
        assert named, f"{kind.name}: no problem names {r['culprit']}: {every}"
        assert any(re.search(kind.message, f"{p[2] or ''}: {p[3]}", re.I) for p in named), (
            f"{kind.name}: the message does not say what is wrong: {[p[3] for p in named]}"
        )
        if kind.kept is not None:
            assert r["culprit_samples"] == kind.kept, (
                f"{kind.name}: {r['culprit_samples']} samples of the culprit stored, "
                f"want {kind.kept}"
            )
    before, after = r["again"]
    assert before == after, (
        f"{kind.name}: a second ingest of unchanged files changed (runs, samples, quarantine "
        f"rows) from {before} to {after}"
    )
    if kind.abstains:
        reasons = r["culprit_skip_reasons"]
        assert any(re.search(kind.abstains, why) for why in reasons), (
            f"{kind.name}: no abstention saying {kind.abstains!r}: {reasons}"
        )
    if kind.heavy:
        assert r["peak_rss"] < PEAK_LIMIT, f"{kind.name}: peak memory {r['peak_rss'] / 1e9:.2f} GB"


_ALL = """
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import hylo_analytics as ha
import hostile
store = ha.open_store(sys.argv[2])
report = store.ingest([Path(p) for p in sys.argv[3:]], progress=False)
fresh = ha.open_store(store.root)
goods = fresh.sql(
    "SELECT run_id, count(*) AS n FROM stg_samples WHERE run_id LIKE 'good-%' GROUP BY 1"
)
print(json.dumps({"quarantined": report.quarantined, "bad_views": hostile.check_views(fresh),
                  "goods": dict(goods.rows())}))
"""


def test_every_kind_in_one_ingest(corpus: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Every culprit at once, in one ingest call: every good run kept, every view answers."""
    work, _ = corpus
    folders = [work / f"k{i:02d}" for i, k in enumerate(hostile.KINDS) if not k.heavy]
    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", _ALL, str(HERE), str(tmp_path / "all")]
        + [str(f) for f in folders],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["quarantined"] > 0
    assert got["bad_views"] == []
    assert got["goods"] == {f"good-{f.name}": hostile.N_GOOD for f in folders}
