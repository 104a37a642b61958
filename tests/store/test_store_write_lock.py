"""Issue 11, item 4: `database is locked` never reaches a writer.

Every write goes through one `BEGIN IMMEDIATE` transaction with the busy timeout, retried with
backoff; here the runner (three connections, as it has), a page's notes and a bundle import hammer
one lab DB from threads and from processes at once, 1,000 iterations in all, and no error reaches
any of them and no measured row is lost.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from store import connect, queries
from tests.store.hammer import run_role
from tests.store.lab_seed import make_bundle, seed_lab

REPO = Path(__file__).resolve().parents[2]

RUNNER_PROC = {"main": 150, "heartbeat": 150, "sink": 100}  # 400
UI_PROC = {"notes": 150, "imports": 30}  # 180
RUNNER_HERE = {"main": 100, "heartbeat": 100, "sink": 60}  # 260
UI_HERE = {"notes": 140, "imports": 20}  # 160
ITERATIONS = sum(d for c in (RUNNER_PROC, UI_PROC, RUNNER_HERE, UI_HERE) for d in c.values())


def test_runner_notes_and_import_at_once_lose_nothing(tmp_path: Path) -> None:
    assert ITERATIONS == 1000
    bundle, _src = make_bundle(tmp_path)
    lab = tmp_path / "lab.db"
    info = seed_lab(lab)
    ids = {"experiment_id": info["experiment_id"], "run_ids": info["run_ids"]}
    env = {**os.environ, "PYTHONPATH": str(REPO), "TUNING_LAB_HOME": str(tmp_path / "home")}

    def spawn(role: str, counts: dict[str, Any]) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "tests.store.hammer", role, str(lab), str(bundle)]
        return subprocess.Popen(
            [*argv, json.dumps({**counts, **ids})],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    procs = [spawn("runner", RUNNER_PROC), spawn("ui", UI_PROC)]
    here: list[dict[str, Any]] = []
    threads = [
        threading.Thread(
            target=lambda r=role, c=counts: here.append(run_role(r, lab, bundle, {**c, **ids}))
        )
        for role, counts in (("runner", RUNNER_HERE), ("ui", UI_HERE))
    ]
    for th in threads:
        th.start()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    for th in threads:
        th.join(timeout=600)
    results += here
    errors = [e for r in results for e in r["errors"]]
    kinds: dict[str, int] = {}
    for e in errors:
        kinds[e] = kinds.get(e, 0) + 1
    first = next((r["traceback"] for r in results if r["traceback"]), "")
    assert not errors, f"{len(errors)} of {ITERATIONS} calls failed: {kinds}\n{first}"

    ops = {}
    for r in results:
        for k, v in r["ops"].items():
            ops[k] = ops.get(k, 0) + v
    assert ops["create_run"] == RUNNER_PROC["main"] + RUNNER_HERE["main"]
    assert ops["heartbeat"] == RUNNER_PROC["heartbeat"] + RUNNER_HERE["heartbeat"]
    assert ops["notes"] == UI_PROC["notes"] + UI_HERE["notes"]
    assert ops["import"] == UI_PROC["imports"] + UI_HERE["imports"]
    # Every measured row the runners wrote is there; the imports were all undone.
    wrote = {k: sum(r["rows"][k] for r in results) for k in ("requests", "samples")}
    conn = sqlite3.connect(lab)
    try:
        local_runs = "select id from runs where experiment_id = ?"
        exp = info["experiment_id"]
        n_req = conn.execute(
            f"select count(*) from requests where run_id in ({local_runs})", [exp]
        ).fetchone()[0]
        n_smp = conn.execute(
            f"select count(*) from samples where run_id in ({local_runs})", [exp]
        ).fetchone()[0]
        assert conn.execute("select count(*) from experiments").fetchone()[0] == 1
        assert conn.execute("pragma integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert n_req == wrote["requests"] + 8 * len(info["run_ids"])
    assert n_smp == wrote["samples"] + 8 * len(info["run_ids"])
    with connect(lab, readonly=True) as db:
        runs = queries.list_runs(db, exp, include_hidden=True)
    assert sum(1 for r in runs if r["status"] == "done") == len(runs)
