"""The new formats in volume: N runs of each, made from the real files, ingested and ranked.

    python benchmarks/bench_formats_volume.py                 # 1,000 runs per format
    python benchmarks/bench_formats_volume.py --runs 2000 --real /path/to/real

Each real result file of ``../shared/data/real`` (a LeRobot ``eval_info.json`` of 100
episodes, lm-eval's results file with its samples companion, an Every Eval Ever aggregate of
19 figures) is copied ``--runs`` times, each copy a run of its own: LeRobot's and lm-eval's
copies differ by one configuration field (their run id is the file's checksum), the Every
Eval Ever copies by their ``evaluation_id``, model and scores (each a count of
``num_samples = 400``, so every figure is a counted rate). Each set is ingested into a fresh
store (``Store.ingest``: walk, read, hash, sniff, parse, commit, publish) and timed against the
parse floor, the same files read and parsed by ``orjson`` in one Python loop. Then the Every
Eval Ever store is ranked (``Store.rank`` over every run, a policy a run): its runs share no
key, so every pair is compared by rates (the Miettinen-Nurminen score test in one suite).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from _measure import peak_rss_mb, reset_peak

HERE = Path(__file__).resolve().parent
REAL = HERE.parent.parent / "shared" / "data" / "real"
LEROBOT = "lerobot/2021147571__smolvla-libero-100k-reproduction__results__full400_h1__parent_spatial_eval_info.json"
LM_EVAL = (
    "lm-eval/EleutherAI__lm-evaluation-harness__outputs__qwen3-8b__negotiationtom__Qwen__Qwen3-8B__"
)
EEE = "every_eval_ever/data__global-mmlu-lite__google__gemma-3-4b-it__548f8e83-3e97-4cb4-83ac-8da11d8f3e5f.json"
COUNT = 400  # the Every Eval Ever copies' num_samples


def _lerobot(real: Path, out: Path, runs: int, rng: np.random.Generator) -> None:
    doc = json.loads((real / LEROBOT).read_text())
    for i in range(runs):
        doc.setdefault("run_config", {})["bench_copy"] = i  # a new checksum, the same episodes
        folder = out / f"ckpt{i:05d}"
        folder.mkdir(parents=True)
        (folder / "eval_info.json").write_bytes(orjson.dumps(doc))


def _lm_eval(real: Path, out: Path, runs: int, rng: np.random.Generator) -> None:
    results = next(real.glob(LM_EVAL + "results_*.json"))
    samples = next(real.glob(LM_EVAL + "samples_*.jsonl"))
    doc = json.loads(results.read_text())
    stamp = results.name.rsplit("results_", 1)[1]
    task_stamp = samples.name.rsplit("samples_", 1)[1]
    for i in range(runs):
        doc["model_name"] = f"acme/model-{i:05d}"
        folder = out / f"model{i:05d}"
        folder.mkdir(parents=True)
        (folder / f"results_{stamp}").write_bytes(orjson.dumps(doc))
        shutil.copyfile(samples, folder / f"samples_{task_stamp}")


def _eee(real: Path, out: Path, runs: int, rng: np.random.Generator) -> None:
    doc = json.loads((real / EEE).read_text())
    base = np.array([r["score_details"]["score"] for r in doc["evaluation_results"]])
    out.mkdir(parents=True)
    for i in range(runs):
        scores = np.clip(base + rng.normal(0, 0.05, len(base)), 0, 1)
        k = np.rint(scores * COUNT).astype(int)
        for r, ki in zip(doc["evaluation_results"], k, strict=True):
            r["score_details"] = {"score": int(ki) / COUNT, "uncertainty": {"num_samples": COUNT}}
        doc["evaluation_id"] = f"global-mmlu-lite/acme_model-{i:05d}/1"
        doc["model_info"] = {**doc["model_info"], "id": f"acme/model-{i:05d}"}
        (out / f"model-{i:05d}.json").write_bytes(orjson.dumps(doc))


SETS: dict[str, Callable[[Path, Path, int, np.random.Generator], None]] = {
    "lerobot": _lerobot,
    "lm-eval": _lm_eval,
    "every_eval_ever": _eee,
}


def _floor(folder: Path) -> float:
    """Read and parse every file of ``folder`` with orjson (JSONL line by line)."""
    t0 = time.perf_counter()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.suffix == ".jsonl":
            for line in data.splitlines():
                orjson.loads(line)
        else:
            orjson.loads(data)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", type=Path, default=REAL, help="the real data folder")
    parser.add_argument("--runs", type=int, default=1000, help="runs made per format")
    args = parser.parse_args()
    import hylo_analytics as ha

    rng = np.random.default_rng(0)
    print(f"load {os.getloadavg()[0]:.1f}, {args.runs:,} runs per format")
    print(f"{'set':16} {'MB':>6} {'files':>6} {'runs':>6} {'samples':>9} {'scores':>9} "
          f"{'ingest s':>8} {'CPU s':>6} {'floor s':>7} {'ratio':>6} {'peak MiB':>8}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench_formats_volume_") as tmp:
        root = Path(tmp)
        stores: dict[str, Any] = {}
        for name, make in SETS.items():
            folder = root / "in" / name
            make(args.real, folder, args.runs, rng)
            mb = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
            files = sum(1 for p in folder.rglob("*") if p.is_file())
            floor = _floor(folder)
            store = ha.open_store(root / "stores" / name)
            reset_peak()
            t0, c0 = time.perf_counter(), time.process_time()
            report = store.ingest(folder, progress=False)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            stores[name] = store
            print(f"{name:16} {mb:6.1f} {files:6,} {report.runs_added:6,} "
                  f"{report.samples_added:9,} {report.scores_added:9,} {wall:8.2f} {cpu:6.2f} "
                  f"{floor:7.2f} {wall / floor:5.1f}x {peak_rss_mb():8.0f}")  # fmt: skip
            if report.quarantined:
                raise SystemExit(f"{name}: {report.quarantined} file(s) quarantined")
        eee = stores["every_eval_ever"]
        metric = eee.sql("SELECT metric, count(*) n FROM scores GROUP BY 1 ORDER BY 2 DESC")
        name = str(metric["metric"][0])
        reset_peak()
        t0 = time.perf_counter()
        ranking = eee.rank(policy="run_id", metric=name, progress=False)
        wall = time.perf_counter() - t0
        tested = ranking.matrix.filter(ranking.matrix["test"].is_not_null()).height
        print(f"rank of {ranking.ranks.height:,} counted runs on {name!r}: {wall:.2f} s, "
              f"{ranking.matrix.height:,} pairs ({tested:,} tested by rates), "
              f"peak {peak_rss_mb():.0f} MiB")  # fmt: skip


if __name__ == "__main__":
    main()
