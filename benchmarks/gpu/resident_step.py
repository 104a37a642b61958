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
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

KEY = "m"
PARAM, VALUES, CONCURRENCY = "max-num-seqs", os.environ.get("H200_M_VALUES", "8,128"), 128
WORKLOAD = (512, 128, int(os.environ.get("H200_M_REQUESTS", "1024")))  # in, out, requests
FLAGS = ["--repeats", "auto", "--max-repeats", os.environ.get("H200_M_MAX_REPEATS", "6")]
FLAGS += ["--budget-minutes", os.environ.get("H200_M_BUDGET", "8"), "--resident", "on"]
# H200_M_KV=none: no explicit budget, so the first sleep-mode start measures one (a `kv_probe`)
KV = os.environ.get("H200_M_KV", "8G")
FLAGS += [] if KV == "none" else ["--set", f"kv-cache-memory-bytes={KV}"]
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


class ComputeApps:
    """Every process that holds device memory while the step runs (`nvidia-smi
    --query-compute-apps`, twice a second), with its most MiB: the check that a server spawned
    ahead (its imports beside the last run's load, tuning.experiment.prelaunching) never made a
    CUDA context before it was let go, and that the API servers never hold device memory."""

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self.seen: dict[int, int] = {}
        self.most_at_once = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ComputeApps:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _poll(self) -> None:
        query = "--query-compute-apps=pid,used_memory"
        argv = ["nvidia-smi", query, "--format=csv,noheader,nounits"]
        while not self._stop.wait(self.period):
            try:
                out = subprocess.run(argv, capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            now = 0
            for line in out.splitlines():
                pid, _, mib = line.partition(",")
                if pid.strip().isdigit() and mib.strip().isdigit():
                    now += 1
                    self.seen[int(pid)] = max(self.seen.get(int(pid), 0), int(mib))
            self.most_at_once = max(self.most_at_once, now)


def gpu_holders(
    apps: ComputeApps, runs: list[dict[str, Any]], probe: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Who held device memory: each pid seen named by the runs (a run's EngineCore, or its API
    server: the process the lab launched, prelaunched or not, which must hold none) or by the
    experiment's KV probe start (`resident.probe`)."""
    cores: dict[int, int | str] = {}
    servers: dict[int, int] = {}
    for name, pid in ((probe or {}).get("engine_pids") or {}).items():
        if str(name).startswith("EngineCore") and str(pid).isdigit():
            cores[int(pid)] = "the KV probe"
    for run in runs:
        for name, pid in ((run.get("startup") or {}).get("engine_pids") or {}).items():
            if str(name).startswith("EngineCore") and str(pid).isdigit():
                cores.setdefault(int(pid), run["seq"])  # the run that started it
        if run.get("server_pid"):
            servers.setdefault(int(run["server_pid"]), run["seq"])
    named = [
        {
            "pid": pid,
            "max_mib": mib,
            "is": (
                f"EngineCore of run {cores[pid]}"
                if isinstance(cores[pid], int)
                else f"EngineCore of {cores[pid]}"
            )
            if pid in cores
            else f"API server of run {servers[pid]}"
            if pid in servers
            else "not a run's",
        }
        for pid, mib in sorted(apps.seen.items())
    ]
    return {
        "processes": named,
        "most_at_once": apps.most_at_once,
        "api_servers_holding_memory": [p for p in named if p["is"].startswith("API server")],
    }


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
            " p99_ttft_ms, p99_tpot_ms, started_at, finished_at, anatomy_json, startup_json,"
            " server_pid"
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
    first_starts, hidden = 0.0, 0.0
    started: set[str] = set()
    for row in rows:
        run = _parsed(row, ("anatomy_json", "startup_json"))
        startup = run["startup"] = run.get("startup") or {}
        run["served_by"] = startup.get("resident") or "restart"
        run["switch_s"] = {k: startup.get(k) for k in ("slept_s", "woke_s") if k in startup}
        anatomy = run.get("anatomy") or {}
        for part in anatomy.get("parts") or ():
            parts[part["key"]] = parts.get(part["key"], 0.0) + float(part["seconds"])
            if part["key"] == "start" and run["value"] not in started:
                first_starts += float(part["seconds"])  # each value's first server start
        hidden += sum(
            float(p["seconds"])
            for p in anatomy.get("overlapped") or ()
            if p["key"] == "prelaunch_ahead"
        )
        started.add(run["value"])
        runs.append(run)
    wall = sum(float((r.get("anatomy") or {}).get("wall_s") or 0.0) for r in runs)
    share = {k: round(v / wall, 4) for k, v in sorted(parts.items())} if wall else {}
    restarts = sum(parts.get(k, 0.0) for k in ("start", "stop", "release", "kv_probe"))
    return {
        "first_starts_s": round(first_starts, 3),
        "restart_share_after_first_starts": round((restarts - first_starts) / wall, 4)
        if wall
        else None,
        "hidden_by_prelaunch_s": round(hidden, 3),
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
    with ComputeApps() as apps:
        out = experiment(KEY)
    exp_id = out.get("experiment_id")
    gpu = gpu_name()
    path = acc / f"resident-{'probe-' if KV == 'none' else ''}{slug(gpu)}.json"
    if isinstance(exp_id, int) and db.exists():
        result = {"cli": out, **result_of(db, exp_id, gpu)}
        probe = (result["experiment"].get("resident") or {}).get("probe")
        result["gpu_memory_holders"] = gpu_holders(apps, result["runs"], probe)
    else:
        result = {"cli": out, "gpu": gpu, "error": "the experiment did not start"}
    path.write_text(json.dumps(result, indent=2, default=str))
    return {"key": KEY, "file": path.name, "rc": out.get("rc"), "wall_s": out.get("wall_s")}
