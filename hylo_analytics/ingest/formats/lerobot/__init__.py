"""LeRobot ``eval_info.json``: what ``lerobot-eval`` writes, in both shapes seen in the wild.

* ``per_task`` (lerobot >= 0.4, ``eval_policy_all``): ``{per_task: [{task_group, task_id,
  metrics: {sum_rewards[], max_rewards[], successes[], video_paths[], ...}}], per_group:
  {<group>: {pc_success, n_episodes, ...}}, overall: {pc_success, n_episodes, eval_s, ...}}``;
  episode ``i`` of a task is index ``i`` of its lists.
* ``per_episode`` (earlier releases, ``eval_policy``): ``{per_episode: [{episode_ix,
  sum_reward, max_reward, success, seed}], aggregated: {pc_success, eval_s, ...}}``; the file
  names no task, so its one task is ``default``.

A file may hold several evaluations under keys of its own (``{"eval_results_400": {...},
"eval_results_800": {...}}``, one per checkpoint): each is a run, its ``agent_version`` the
key's trailing number (else the key).

Identity, decided here:

* **agent**: ``run_config.policy_path`` when the file has one (a field some scripts add),
  its last component that names the policy (not ``pretrained_model`` nor a checkpoint
  number); else the file stem without ``eval_info`` (``parent_spatial_eval_info.json`` ->
  ``parent_spatial``), else the parent folder (``lerobot-eval`` writes ``eval_info.json``
  into the run's output folder). ``runs.extra.agent_name_from`` says which.
* **run_id**: ``lerobot:<agent>[@<checkpoint>]:<sha256[:12]>``.
* **key**: ``<task_group>/<task_id>#<episode index>`` (``per_episode``:
  ``default#<seed>``, the index when the seed is null), so two policies or checkpoints run
  on the same start states pair. ``seed`` is the number the key ends with, as vla-eval's
  start-state index is (an EvalLog export needs one): ``lerobot-eval`` starts every task at
  the run's seed and adds one per episode, so the index names the start state; the run's
  own seed (``run_config.seed``) is in its ``extra``. ``benchmark_id`` is the task group(s).

Scores: ``success`` (0/1), ``sum_reward``, ``max_reward`` per episode (a missing list
abstains, ``not recorded``); the file's ``pc_success`` is their mean of ``success``, which
``aggregate`` shows. The file's own aggregates (``overall`` / ``aggregated``, ``per_group``)
are the run's ``results``; ``run_config`` and the timings go to its ``extra``, each episode's
video to the sample's. A value of the wrong type, a non-finite number, lists of different
lengths or a key given twice is a field error naming the path (``per_task[3].metrics.
successes[4]``) and its line; the file is rejected whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import duckdb
import pyarrow as pa

from hylo_analytics._sql import query_sql
from hylo_analytics.ingest._common import load_json_docs
from hylo_analytics.ingest._files import SourceFile
from hylo_analytics.ingest._locate import field_line
from hylo_analytics.ingest._reader import Parsed, Reader
from hylo_analytics.ingest._report import Problem
from hylo_analytics.ingest.traces import name_surrogates

__all__ = ["FORMAT", "READER", "agent_of", "parse", "sniff"]

FORMAT = "lerobot.eval_info"

# the keys of each shape, as lerobot-eval writes them near the top of the file
_SHAPES = ((b'"per_task"', b'"task_group"'), (b'"per_episode"', b'"episode_ix"'))
_STEM = re.compile(r"[_.-]*eval_info$")
_NOT_A_NAME = re.compile(r"^(pretrained_model|checkpoints?|last|\d+)$")


def sniff(head: bytes, path: Path | None = None) -> bool:
    """A JSON object whose first bytes hold a ``per_task`` list of ``task_group`` entries or
    a ``per_episode`` list of ``episode_ix`` rows (a file that only shares the name, such as
    a Stable-Baselines summary, has neither)."""
    h = head.lstrip()
    return h.startswith(b"{") and any(a in h and b in h for a, b in _SHAPES)


def agent_of(path: Path, policy_path: str | None) -> tuple[str, str]:
    """``(agent name, where it came from)`` for a file: see the module's docstring."""
    if policy_path:
        parts = [p for p in PurePosixPath(policy_path.replace("\\", "/")).parts if p != "/"]
        named = [p for p in parts if not _NOT_A_NAME.match(p)]
        if named:
            return named[-1], "run_config.policy_path"
    stem = _STEM.sub("", path.stem)
    if stem:
        return stem, "file name"
    return path.parent.name or path.stem, "folder name"


def parse(con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile]) -> Parsed:
    """Every evaluation of every file in a few queries."""
    _good, problems = load_json_docs(con, "_lr", files)
    problems = name_surrogates(problems, {str(f.path): f.data for f in files})
    con.execute(f"CREATE OR REPLACE TEMP TABLE _lr_ev AS {query_sql('ingest_lerobot_evals')}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _lr_raw AS {query_sql('ingest_lerobot_episodes')}")
    con.execute(f"CREATE OR REPLACE TEMP TABLE _lr_ep AS {query_sql('ingest_lerobot_checked')}")
    bad = _problems(con, files, problems)
    _register_ids(con, files, bad)
    out = _rows(con)
    con.unregister("_lr")
    con.unregister("_lr_ids")
    for t in ("_lr_ev", "_lr_raw", "_lr_ep"):
        con.execute(f"DROP TABLE IF EXISTS {t}")
    return Parsed(*out, problems=problems)


def _problems(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], problems: list[Problem]
) -> set[int]:
    """Every problem of every file (no cap: a file is stored only if all of it passed);
    returns the files that have one."""
    bad: set[int] = set()
    doc_level = con.execute(
        """SELECT l.file_idx FROM _lr AS l
           WHERE l.file_idx NOT IN (SELECT file_idx FROM _lr_ev) ORDER BY 1"""
    ).fetchall()
    for (fi,) in doc_level:
        why = "expected a LeRobot eval_info: per_task or per_episode (or evaluations of them)"
        problems.append(Problem(str(files[fi].path), 1, None, why))
        bad.add(fi)
    shape = con.execute(
        """SELECT file_idx, coalesce(checkpoint || '.', '') || CASE
                    WHEN json_type(ev, '$.per_task') IS NOT NULL THEN 'per_task'
                    ELSE 'per_episode' END,
                  lower(coalesce(json_type(ev, '$.per_task'), json_type(ev, '$.per_episode')))
           FROM _lr_ev
           WHERE coalesce(json_type(ev, '$.per_task'), json_type(ev, '$.per_episode')) <> 'ARRAY'
           UNION ALL
           SELECT e.file_idx,
                  coalesce(e.checkpoint || '.', '') || 'per_task[' || t.key || '].metrics.successes',
                  lower(coalesce(json_type(t.value, '$.metrics.successes'), 'nothing'))
           FROM _lr_ev AS e, json_each(e.ev, '$.per_task') AS t
           WHERE json_type(e.ev, '$.per_task') = 'ARRAY'
             AND json_type(t.value, '$.metrics.successes') IS DISTINCT FROM 'ARRAY'
           ORDER BY 1, 2"""
    ).fetchall()
    rows = con.execute(
        """SELECT file_idx, bad[1], bad[2] FROM _lr_ep WHERE bad IS NOT NULL
           ORDER BY file_idx, ev_idx, task_idx, ep_idx"""
    ).fetchall()
    wrong = [(fi, fld, f"expected an array, got {got}") for fi, fld, got in shape]
    for fi, fld, why in [*wrong, *rows]:
        sf = files[fi]
        problems.append(Problem(str(sf.path), field_line(sf.data, fld), fld, why))
        bad.add(fi)
    return bad


def _register_ids(
    con: duckdb.DuckDBPyConnection, files: Sequence[SourceFile], bad: set[int]
) -> None:
    """``_lr_ids``: each evaluation of a good file with its run id, agent and version."""
    evals = con.execute(
        """SELECT file_idx, ev_idx, checkpoint, json_extract_string(ev, '$.run_config.policy_path')
           FROM _lr_ev ORDER BY file_idx, ev_idx"""
    ).fetchall()
    cols: dict[str, list[object]] = {k: [] for k in ("file_idx", "ev_idx", "run_id", "agent",
                                                     "agent_from", "version")}  # fmt: skip
    for fi, ev, ckpt, policy in evals:
        if fi in bad:
            continue
        sf = files[fi]
        agent, source = agent_of(sf.path, policy)
        version = None
        if ckpt is not None:
            found = re.search(r"(\d+)$", ckpt)
            version = found.group(1) if found else ckpt
        at = f"@{ckpt}" if ckpt is not None else ""
        for k, v in zip(cols, (fi, ev, f"lerobot:{agent}{at}:{sf.sha256[:12]}", agent, source,
                               version), strict=True):  # fmt: skip
            cols[k].append(v)
    con.register(
        "_lr_ids",
        pa.table(
            {
                **cols,
                "file_idx": pa.array(cols["file_idx"], pa.int32()),
                "ev_idx": pa.array(cols["ev_idx"], pa.int64()),
            }
        ),
    )


def _rows(con: duckdb.DuckDBPyConnection) -> tuple[pa.Table, pa.Table, pa.Table]:
    """The runs, samples and scores of the good evaluations."""
    runs = con.sql(query_sql("ingest_lerobot_runs", format=FORMAT)).to_arrow_table()
    samples = con.sql(
        """SELECT i.file_idx, i.run_id, e.key, e.task_id, e.seed_v AS seed, 1 AS epoch,
                  e.key AS episode_id,
                  CASE WHEN e.success_v = 1.0 THEN 'success' ELSE 'failure' END AS status,
                  'none' AS trace_status,
                  CASE WHEN e.video_path IS NOT NULL
                       THEN json_object('video_path', e.video_path) END AS extra
           FROM _lr_ep AS e JOIN _lr_ids AS i USING (file_idx, ev_idx)
           ORDER BY i.file_idx, e.ev_idx, e.task_idx, e.ep_idx"""
    ).to_arrow_table()
    scores = con.sql(query_sql("ingest_lerobot_scores")).to_arrow_table()
    return runs, samples, scores


READER = Reader(FORMAT, sniff, parse)
