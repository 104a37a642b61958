"""One run on a fleet node: the Ray actor that executes it with the same code as a local run.

The worker runs the lab's one run path, `RunUnit.run` (server lifecycle, warm-up, load on the same
node as its server, telemetry), against a scratch SQLite file on its node that starts from the
experiment's row as the driver's database stores it, whole; then it hands the run's rows (run,
per-request rows, samples) and its placement back to the driver, which is the only writer of the
lab's database. The run keeps the uid the driver gave it, so its server log is named as the lab's
run is. The scratch file is deleted before `run` returns.

Isolation: every run picks its own HTTP port (the launch takes a free one) and its own
`VLLM_PORT` base (vLLM's internal ports collide when several instances start on one node);
a guard process (tuning.decide.fleet.guard) stops the run's servers by group if the worker dies.
The actor is threaded, so `cancel` and `status` answer while `run` works.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any

from store import connect
from store.transfer import run_rows, store_experiment_row
from tuning.decide.fleet.placement import describe_placement
from tuning.engine.launch import free_port
from tuning.experiment.bookkeeping import Bookkeeping
from tuning.experiment.run_unit import RunUnit

# Ray keeps nothing of ours but this module path; the class is made remote by the driver.
MAX_CONCURRENCY = 4


def worker_engine(engine: dict[str, Any] | None, gpus_per_run: int) -> dict[str, Any] | None:
    """The experiment's engine for one fleet run: its own VLLM_PORT base, and the mp executor
    for a multi-GPU run (inside Ray, vLLM would otherwise pick its Ray executor)."""
    if engine is None:
        return None
    out = dict(engine)
    out["env"] = {**(engine.get("env") or {}), "VLLM_PORT": str(free_port())}
    if gpus_per_run > 1 and out.get("backend") != "cpu":
        out["command"] = [*engine["command"], "--distributed-executor-backend", "mp"]
    return out


class RunWorker:
    """A Ray actor (made remote by the driver), one per slot: `run(job)` for each run of the slot
    in turn, `cancel()` and `status()` meanwhile, `close()` at the end."""

    def __init__(self) -> None:
        import psutil

        from tuning.decide.fleet.guard import OWNER_ENV, owner_mark, start_detached_guard

        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._phase = "queued"
        self._book: Bookkeeping | None = None
        self._unit: RunUnit | None = None
        # every server this worker starts inherits the mark (tuning.engine.server copies os.environ)
        os.environ[OWNER_ENV] = owner_mark(os.getpid(), psutil.Process().create_time())
        self._guard = start_detached_guard(os.getpid())

    def pid(self) -> int:
        return os.getpid()

    def cancel(self) -> None:
        self._cancel.set()

    def status(self) -> dict[str, Any]:
        with self._lock:
            book, unit = self._book, self._unit
            out: dict[str, Any] = {"phase": self._phase, "pid": os.getpid()}
        if book is not None:
            out["requests_done"] = book.live.requests_done
            out["requests_total"] = book.live.requests_total
        if unit is not None:
            server = unit.server
            out["server_pid"] = server.pid if server is not None else None
        return out

    def _progress(self, event: str, data: dict[str, Any]) -> None:
        if event == "phase":
            with self._lock:
                self._phase = str(data.get("phase"))

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        """Execute one run; returns store.transfer.run_rows(...) plus 'placement'."""
        import ray

        self._cancel.clear()  # this worker runs its slot's runs one after another
        node_id = ray.get_runtime_context().get_node_id()
        placement = describe_placement(node_id, str(job["slot"]))
        row = dict(job["experiment"])  # the lab's experiments row, whole
        stored = json.loads(row["engine_json"]) if row.get("engine_json") else None
        engine = worker_engine(stored, int(job.get("gpus_per_run") or 0))
        row["engine_json"] = json.dumps(engine) if engine is not None else None
        if engine is not None:
            placement["vllm_port"] = int(engine["env"]["VLLM_PORT"])
        scratch = Path(tempfile.mkdtemp(prefix="lab-fleet-"))
        try:
            db_path = scratch / "run.db"
            with connect(db_path) as db:
                exp_id = store_experiment_row(db, row)
            with Bookkeeping(db_path, exp_id, self._progress) as book:
                unit = RunUnit(book, float(job["start_timeout"]), Path(job["log_dir"]))
                if len(unit.gpu_baseline) > len(placement["gpu_uuids"]):
                    # NVML sees every GPU of the node, other runs' too: waiting for all of them
                    # to return to this baseline would tie this run's stop to theirs.
                    unit.gpu_baseline = {}
                book.live.cancel = self._cancel
                with self._lock:
                    self._book, self._unit = book, unit
                try:
                    run_id = unit.run(
                        int(job["seq"]), job["value"], int(job["repeat"]), uid=str(job["uid"])
                    )
                finally:
                    unit.close()
                    with self._lock:
                        self._book, self._unit = None, None
                        self._phase = "done"
                rows = run_rows(book.db, run_id)
        except Exception:
            traceback.print_exc()
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        rows["placement"] = placement
        return rows

    def close(self) -> None:
        """Stop the guard (the run's servers are already stopped)."""
        from tuning.decide.fleet.guard import stop_guard

        stop_guard(self._guard)
