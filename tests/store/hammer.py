"""Concurrent writers of one lab DB, as they happen in real use: the runner (its own thread
writing runs, request rows and summaries; a heartbeat thread; a telemetry sink thread, each with
its own connection), a page saving notes and tags, and a bundle import. Every call that raises is
recorded: the test that drives this expects none.

    python -m tests.store.hammer ROLE DB BUNDLE JSON_COUNTS   (prints the result as JSON)
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.clock import now_iso
from store import connect, queries, repo
from store.bundle import import_bundle
from tests.store.lab_seed import WORKLOAD, records, samples

ROLES = ("runner", "ui")


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ops: dict[str, int] = {}
        self.errors: list[str] = []
        self.first_traceback = ""
        self.rows = {"requests": 0, "samples": 0}

    def call(self, name: str, fn: Callable[[], Any]) -> Any:
        try:
            out = fn()
        except Exception as exc:  # what would reach the runner, the page or the CLI
            with self.lock:
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                self.first_traceback = self.first_traceback or traceback.format_exc(limit=6)
            return None
        with self.lock:
            self.ops[name] = self.ops.get(name, 0) + 1
        return out


def _runner_main(db_path: Path, exp_id: int, n: int, t: Tally, current: list[int]) -> None:
    with connect(db_path) as db:
        for i in range(n):
            rid = t.call(
                "create_run",
                lambda i=i: repo.create_run(
                    db,
                    experiment_id=exp_id,
                    seq=1000 + i,
                    repeat_index=0,
                    param="max-num-seqs",
                    value=str(i),
                    workload_json=WORKLOAD,
                    status="running",
                ),
            )
            if rid is None:
                continue
            current[0] = rid
            if t.call("insert_requests", lambda rid=rid: repo.insert_requests(db, rid, records(20))):
                with t.lock:
                    t.rows["requests"] += 20
            if t.call("insert_samples", lambda rid=rid: repo.insert_samples(db, rid, samples(10))):
                with t.lock:
                    t.rows["samples"] += 10
            t.call(
                "store_summary",
                lambda rid=rid: repo.store_summary(db, rid, {"completed": 20, "failed": 0}),
            )
            t.call(
                "finish_run",
                lambda rid=rid: repo.update_run(db, rid, status="done", finished_at=now_iso()),
            )


def _heartbeat(db_path: Path, exp_id: int, n: int, t: Tally) -> None:
    with connect(db_path) as db:
        for i in range(n):
            t.call(
                "heartbeat",
                lambda i=i: repo.update_experiment(
                    db, exp_id, heartbeat_at=now_iso(), requests_done=i, phase="loading"
                ),
            )
            t.call("cancel_requested", lambda: queries.cancel_requested(db, exp_id))
            time.sleep(0.002)


def _sink(db_path: Path, n: int, t: Tally, current: list[int]) -> None:
    with connect(db_path) as db:
        for _ in range(n):
            rid = current[0]
            if t.call("sink_samples", lambda rid=rid: repo.insert_samples(db, rid, samples(5))):
                with t.lock:
                    t.rows["samples"] += 5
            time.sleep(0.003)


def _notes(db_path: Path, run_ids: list[int], n: int, t: Tally) -> None:
    rng = random.Random(n)
    with connect(db_path) as db:
        for i in range(n):
            rid = rng.choice(run_ids)
            t.call(
                "notes",
                lambda rid=rid, i=i: repo.update_run(db, rid, notes=f"note {i}", tags="a,b"),
            )
            t.call("read_runs", lambda: queries.list_runs(db, limit=20))


def _imports(db_path: Path, bundle: Path, n: int, t: Tally) -> None:
    for _ in range(n):
        result = t.call("import", lambda: import_bundle(db_path, bundle))
        if result is None:
            continue
        for exp_id in result.experiments_added:

            def drop(exp_id: int = exp_id) -> None:
                with connect(db_path) as db:
                    repo.delete_experiment(db, exp_id)

            t.call("delete_imported", drop)


def run_role(role: str, db_path: Path, bundle: Path, counts: dict[str, Any]) -> dict[str, Any]:
    """Start the role's threads, wait for them, and return what they did."""
    t = Tally()
    threads: list[threading.Thread] = []
    if role == "runner":
        current = [int(counts["run_ids"][0])]
        exp_id = int(counts["experiment_id"])
        threads += [
            threading.Thread(
                target=_runner_main, args=(db_path, exp_id, counts["main"], t, current)
            ),
            threading.Thread(target=_heartbeat, args=(db_path, exp_id, counts["heartbeat"], t)),
            threading.Thread(target=_sink, args=(db_path, counts["sink"], t, current)),
        ]
    else:
        threads += [
            threading.Thread(target=_notes, args=(db_path, counts["run_ids"], counts["notes"], t)),
            threading.Thread(target=_imports, args=(db_path, bundle, counts["imports"], t)),
        ]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return {"ops": t.ops, "errors": t.errors, "rows": t.rows, "traceback": t.first_traceback}


if __name__ == "__main__":
    role, db_arg, bundle_arg, counts_arg = sys.argv[1:5]
    print(json.dumps(run_role(role, Path(db_arg), Path(bundle_arg), json.loads(counts_arg))))
