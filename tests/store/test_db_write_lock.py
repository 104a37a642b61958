"""Issue 11, item 4: `database is locked` never reaches a writer.

Every write goes through one `BEGIN IMMEDIATE` transaction with the busy timeout, retried with
backoff. Here a runner in its own process (its main thread writing runs, request rows, samples and
summaries, a heartbeat thread and a telemetry sink thread, each with its own connection, as the
real runner has), a page saving notes, a second heartbeat and a bundle import hammer one lab DB at
once, 1,000 write iterations in all: no call fails and no measured row is lost.

The runner role runs in a subprocess of this module: `python -m tests.store.test_db_write_lock
DB COUNTS_JSON` prints what it did as JSON.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from core.clock import now_iso
from store import connect, queries, repo
from store.bundle import export_bundle, import_bundle
from store.transfer import run_rows, store_run_rows
from tests.factories import Load, records, samples, seed_clean_lab, workload

REPO = Path(__file__).resolve().parents[2]
WL = workload(num_requests=10, output_len=4)
TINY = Load(duration_s=1.0, period_s=0.25)
RUNNER_PROC = {"main": 120, "heartbeat": 200, "sink": 150}  # 470 in the runner's process
HERE = {"notes": 300, "heartbeat": 220, "imports": 10}  # 530 in this one


class Tally:
    """Every call's outcome; an exception is what would have reached the runner or the page."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: dict[str, int] = {}
        self.errors: list[str] = []
        self.traceback = ""
        self.rows = {"requests": 0, "samples": 0}

    def call(self, name: str, fn: Callable[[], Any], rows: tuple[str, int] | None = None) -> Any:
        try:
            out = fn()
        except Exception as exc:
            with self.lock:
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                self.traceback = self.traceback or traceback.format_exc(limit=6)
            return None
        with self.lock:
            self.ops[name] = self.ops.get(name, 0) + 1
            if rows:
                self.rows[rows[0]] += rows[1]
        return out

    def result(self) -> dict[str, Any]:
        return {"ops": self.ops, "errors": self.errors, "rows": self.rows, "tb": self.traceback}


def _runner_main(db_path: Path, exp_id: int, n: int, t: Tally, current: list[int]) -> None:
    rng = np.random.default_rng(0)
    recs = records(rng, WL, 0.05, 0.01)
    smp = samples(TINY, 0.3, 1e9)
    with connect(db_path) as db:
        for i in range(n):
            fields = {"experiment_id": exp_id, "seq": 100 + i, "param": "max-num-seqs"}
            rid = t.call("create_run", lambda f=fields: repo.create_run(db, **f, value="2"))
            if rid is None:
                continue
            current[0] = rid
            t.call("requests", lambda r=rid: repo.insert_requests(db, r, recs), ("requests", 10))
            t.call("samples", lambda r=rid: repo.insert_samples(db, r, smp), ("samples", len(smp)))
            t.call("summary", lambda r=rid: repo.store_summary(db, r, {"completed": 10}))
            t.call("finish", lambda r=rid: repo.update_run(db, r, status="done"))


def _heartbeat(db_path: Path, exp_id: int, n: int, t: Tally) -> None:
    with connect(db_path) as db:
        for i in range(n):
            beat = {"heartbeat_at": now_iso(), "requests_done": i, "phase": "loading"}
            t.call("heartbeat", lambda b=beat: repo.update_experiment(db, exp_id, **b))
            t.call("cancel?", lambda: queries.cancel_requested(db, exp_id))


def _sink(db_path: Path, n: int, t: Tally, current: list[int]) -> None:
    smp = samples(TINY, 0.3, 1e9)[:5]
    with connect(db_path) as db:
        for _ in range(n):
            rid = current[0]
            t.call("sink", lambda r=rid: repo.insert_samples(db, r, smp), ("samples", 5))
            time.sleep(0.001)


def _notes(db_path: Path, run_ids: list[int], n: int, t: Tally) -> None:
    rng = random.Random(n)
    with connect(db_path) as db:
        for i in range(n):
            rid = rng.choice(run_ids)
            t.call("notes", lambda r=rid, i=i: repo.update_run(db, r, notes=f"note {i}", tags="a"))
            if i % 25 == 0:  # the page reads now and then
                t.call("read", lambda: queries.list_runs(db, limit=5))


def _imports(db_path: Path, bundle: Path, n: int, t: Tally) -> None:
    for _ in range(n):
        result = t.call("import", lambda: import_bundle(db_path, bundle))
        for exp_id in result.experiments_added if result else []:

            def drop(exp_id: int = exp_id) -> None:
                with connect(db_path) as db:
                    repo.delete_experiment(db, exp_id)

            t.call("delete", drop)


def _threads(*targets: tuple[Callable[..., None], tuple[Any, ...]]) -> None:
    threads = [threading.Thread(target=fn, args=args) for fn, args in targets]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def runner_role(db_path: Path, counts: dict[str, Any]) -> dict[str, Any]:
    t = Tally()
    current = [int(counts["run_ids"][0])]
    exp_id = int(counts["experiment_id"])
    _threads(
        (_runner_main, (db_path, exp_id, counts["main"], t, current)),
        (_heartbeat, (db_path, exp_id, counts["heartbeat"], t)),
        (_sink, (db_path, counts["sink"], t, current)),
    )
    return t.result()


def test_runner_notes_heartbeat_and_import_at_once_lose_nothing(tmp_path: Path) -> None:
    assert sum(RUNNER_PROC.values()) + sum(HERE.values()) == 1000
    src, lab = tmp_path / "bob.db", tmp_path / "lab.db"
    exp_id = seed_clean_lab(src, "bob", "box-b", values=(4,), repeats=1, wl=WL, load=TINY)[
        "experiment_id"
    ]
    bundle = tmp_path / "bob.zip"
    export_bundle(src, bundle, experiment_ids=[exp_id], author="bob", host="box-b")
    info = seed_clean_lab(lab, values=(2, 16), repeats=1, wl=WL, load=TINY)
    exp_id, run_ids = info["experiment_id"], info["run_ids"]
    with connect(lab, readonly=True) as db:
        before = {k: db.table(k).count for k in ("requests", "samples")}
    counts = {**RUNNER_PROC, "experiment_id": exp_id, "run_ids": run_ids}
    env = {**os.environ, "PYTHONPATH": str(REPO), "TUNING_LAB_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.test_db_write_lock", str(lab), json.dumps(counts)],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    t = Tally()
    _threads(
        (_notes, (lab, run_ids, HERE["notes"], t)),
        (_heartbeat, (lab, exp_id, HERE["heartbeat"], t)),
        (_imports, (lab, bundle, HERE["imports"], t)),
    )
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    results = [json.loads(out.strip().splitlines()[-1]), t.result()]

    errors = [e for r in results for e in r["errors"]]
    first = next((r["tb"] for r in results if r["tb"]), "")
    assert not errors, f"{len(errors)} calls failed: {sorted(set(errors))[:5]}\n{first}"
    ops: dict[str, int] = {}
    for r in results:
        for k, v in r["ops"].items():
            ops[k] = ops.get(k, 0) + v
    assert ops["create_run"] == RUNNER_PROC["main"]
    assert ops["heartbeat"] == RUNNER_PROC["heartbeat"] + HERE["heartbeat"]
    assert ops["sink"] == RUNNER_PROC["sink"]
    assert ops["notes"] == HERE["notes"]
    assert ops["import"] == ops["delete"] == HERE["imports"]
    # Every measured row is there (the imports were all undone), and the file is sound.
    wrote = results[0]["rows"]
    with connect(lab, readonly=True) as db:
        assert db.table("requests").count == before["requests"] + wrote["requests"]
        assert db.table("samples").count == before["samples"] + wrote["samples"]
        assert [e["id"] for e in queries.list_experiments(db)] == [exp_id]
        assert db.execute("pragma integrity_check").fetchone()[0] == "ok"


def test_a_deferred_writer_that_read_first_still_waits_its_turn(tmp_path: Path) -> None:
    """The defect itself: a write whose transaction began with a read got SQLITE_BUSY at once when
    another connection committed in between; through BEGIN IMMEDIATE it waits and succeeds."""
    lab = tmp_path / "lab.db"
    info = seed_clean_lab(lab, values=(2,), repeats=1, wl=WL, load=TINY)
    rid = info["run_ids"][0]
    recs = records(np.random.default_rng(1), WL, 0.05, 0.01)
    other = sqlite3.connect(lab, timeout=10, check_same_thread=False)
    failures: list[str] = []
    with connect(lab) as db:
        for k in range(10):
            batch = [replace(r, index=r.index + 100 * (k + 1)) for r in recs]
            other.execute("BEGIN IMMEDIATE")
            other.execute("UPDATE runs SET notes = 'x' WHERE id = ?", [rid])
            releaser = threading.Timer(0.02, other.commit)
            releaser.start()
            try:
                repo.insert_requests(db, rid, batch)
            except sqlite3.OperationalError as exc:
                failures.append(str(exc))
            releaser.join()
    other.close()
    assert failures == []


def _another_commit_before_the_first_write(db: Any, path: Path) -> list[str]:
    """While `db` runs a transaction: as its first write statement starts, another connection
    commits (without waiting: when `db` already holds the write lock, it cannot). A transaction
    that began deferred and read first then holds a stale snapshot: SQLITE_BUSY at once."""
    other = sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)
    seen: list[str] = []

    def trace(sql: str) -> None:
        first = sql.lstrip().split(" ", 1)[0].upper()
        if seen or not db.conn.in_transaction or first not in {"UPDATE", "INSERT", "DELETE"}:
            return
        try:
            other.execute("UPDATE experiments SET heartbeat_at = 'beat' WHERE id = 1")
            seen.append("committed")
        except sqlite3.OperationalError as exc:
            seen.append(str(exc))

    db.conn.set_trace_callback(trace)
    return seen


def test_a_fleet_run_s_rows_are_stored_whatever_commits_beside_them(tmp_path: Path) -> None:
    """Fresh-clone run 2 of 0bcb7f4: the fleet test's resume was refused with `database is
    locked`: `store_run_rows` wrote a worker's rows in sqlite-utils' `atomic()` (BEGIN deferred),
    whose update reads the row first, so the runner's heartbeat committing in between failed the
    store at once. Through `write_transaction` the heartbeat waits its turn instead."""
    lab = tmp_path / "lab.db"
    info = seed_clean_lab(lab, values=(2, 4), repeats=1, wl=WL, load=TINY)
    done, target = info["run_ids"]
    with connect(lab) as db:
        rows = run_rows(db, done)
        seen = _another_commit_before_the_first_write(db, lab)
        store_run_rows(db, target, rows)
        db.conn.set_trace_callback(None)
        stored = db.execute("select count(*) from requests where run_id = ?", [target])
        assert stored.fetchone()[0] == len(rows["requests"]) > 0
    assert seen and "locked" in seen[0], seen  # the other writer waited; it did not cut in


def test_a_workload_is_saved_whatever_commits_beside_it(tmp_path: Path) -> None:
    """`save_workload` looked its name up and then wrote, in the same deferred `atomic()`."""
    lab = tmp_path / "lab.db"
    seed_clean_lab(lab, values=(2,), repeats=1, wl=WL, load=TINY)
    with connect(lab) as db:
        seen = _another_commit_before_the_first_write(db, lab)
        wid = repo.save_workload(db, "chat", {"num_requests": 4}, "f" * 16)
        db.conn.set_trace_callback(None)
        assert db.table("workloads").get(wid)["name"] == "chat"
    assert seen and "locked" in seen[0], seen


if __name__ == "__main__":
    print(json.dumps(runner_role(Path(sys.argv[1]), json.loads(sys.argv[2]))))
