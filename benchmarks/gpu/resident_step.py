"""Step (m) of benchmarks/gpu/run_on_h200.py: resident engines on a real GPU (issue 38, item 4).

A two-value until-decided experiment of a flag with a large effect that does not size memory
(max-num-seqs 8 vs 128 at concurrency 128, compiled, `--resident on`, one explicit KV budget),
run through the lab's CLI like every other step; then its result as one JSON file named by the
GPU (`resident-<gpu>.json`, e.g. resident-nvidia-h100-80gb-hbm3.json) in the pipeline's folder,
which `collect` copies to $OUT: the experiment row (its decision, its resident state with the
check of switched vs restarted runs and the KV after a wake, its time outside the runs), every
run's anatomy and how its server came to serve it (start or switch), and the wall time with the
share spent starting, switching and under load. Nothing here runs off the GPU box.

    H200_STEPS=m python3 benchmarks/gpu/run_on_h200.py stage2 --until 560     (after stage1)
    H200_STEPS=m python3 benchmarks/gpu/run_on_h200.py start --until 540      (a warm machine)
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY = "m"
PARAM, VALUES, CONCURRENCY = "max-num-seqs", os.environ.get("H200_M_VALUES", "8,128"), 128
WORKLOAD = (512, 128, int(os.environ.get("H200_M_REQUESTS", "1024")))  # in, out, requests
FLAGS = ["--repeats", "auto", "--max-repeats", os.environ.get("H200_M_MAX_REPEATS", "6")]
FLAGS += ["--budget-minutes", os.environ.get("H200_M_BUDGET", "8"), "--resident", "on"]
FLAGS += ["--set", f"kv-cache-memory-bytes={os.environ.get('H200_M_KV', '8G')}"]
JSON_COLUMNS = ("resident_json", "decision_json", "anatomy_json", "repeats_plan_json")


def gpu_name() -> str:
    """The GPU's name as nvidia-smi gives it (argv, no shell), for file names; 'gpu' without."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        name = (done.stdout or "").splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        name = ""
    return name or "gpu"


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def _parsed(row: sqlite3.Row, columns: tuple[str, ...]) -> dict[str, Any]:
    out = dict(row)
    for column in columns:
        if out.get(column):
            out[column.removesuffix("_json")] = json.loads(out.pop(column))
    return out


def result_of(db: Path, experiment_id: int, gpu: str) -> dict[str, Any]:
    """The experiment, its runs' anatomies and startup modes, and the time shares, from the DB."""
    con = sqlite3.connect(db, timeout=30)
    con.row_factory = sqlite3.Row
    try:
        exp = con.execute("SELECT * FROM experiments WHERE id = ?", [experiment_id]).fetchone()
        rows = con.execute(
            "SELECT id, seq, value, repeat_index, status, time_to_healthy_s, output_throughput,"
            " p99_ttft_ms, p99_tpot_ms, started_at, finished_at, anatomy_json, startup_json"
            " FROM runs WHERE experiment_id = ? ORDER BY seq",
            [experiment_id],
        ).fetchall()
    finally:
        con.close()
    keep = ("id", "name", "param", "values_json", "status", "started_at", "finished_at")
    experiment = {
        k: v
        for k, v in _parsed(exp, JSON_COLUMNS).items()
        if k in keep or (k in {c.removesuffix("_json") for c in JSON_COLUMNS})
    }
    runs = []
    parts: dict[str, float] = {}
    for row in rows:
        run = _parsed(row, ("anatomy_json", "startup_json"))
        startup = run.pop("startup", None) or {}
        run["served_by"] = startup.get("resident") or "restart"
        run["switch_s"] = {k: startup.get(k) for k in ("slept_s", "woke_s") if k in startup}
        for part in (run.get("anatomy") or {}).get("parts") or ():
            parts[part["key"]] = parts.get(part["key"], 0.0) + float(part["seconds"])
        runs.append(run)
    wall = sum(float((r.get("anatomy") or {}).get("wall_s") or 0.0) for r in runs)
    share = {k: round(v / wall, 4) for k, v in sorted(parts.items())} if wall else {}
    restarts = sum(parts.get(k, 0.0) for k in ("start", "stop", "release", "kv_probe"))
    return {
        "gpu": gpu,
        "experiment": experiment,
        "runs": runs,
        "wall_s_runs": round(wall, 3),
        "parts_s": {k: round(v, 3) for k, v in sorted(parts.items())},
        "share": share,
        "restart_share": round(restarts / wall, 4) if wall else None,
    }


def resident_step(
    experiment: Callable[[str], dict[str, Any]], db: Path, acc: Path
) -> dict[str, Any]:
    """Run step (m) through `experiment` (run_on_h200's, with this step's settings registered)
    and write `resident-<gpu>.json` under `acc`; returns what the pipeline logs."""
    out = experiment(KEY)
    exp_id = out.get("experiment_id")
    gpu = gpu_name()
    path = acc / f"resident-{slug(gpu)}.json"
    if isinstance(exp_id, int) and db.exists():
        result = {"cli": out, **result_of(db, exp_id, gpu)}
    else:
        result = {"cli": out, "gpu": gpu, "error": "the experiment did not start"}
    path.write_text(json.dumps(result, indent=2, default=str))
    return {"key": KEY, "file": path.name, "rc": out.get("rc"), "wall_s": out.get("wall_s")}
