"""A search started from the UI: `python -m tuning search ... --db DB --json` in its own session,
its output in the lab's logs, so it outlives the page and any browser tab (as experiments do,
tuning.experiment.supervisor). One at a time: none starts while an experiment or another search
runs, and New experiment waits while a search runs (between its steps no experiment is active).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from store import connect, queries, repo
from tuning.decide.holder import machine_holder
from tuning.decide.search.driver import SearchSpec
from tuning.decide.search.record import reap_searches, search_alive, spec_json, step_prefix
from tuning.engine.params import format_value
from tuning.engine.procs import process_start_time
from tuning.experiment.supervisor import cancel_experiment, reap, spawn_detached
from tuning.settings import lab_home


class SearchBusy(RuntimeError):
    """Something else runs on this machine; the message says what."""


def _bound(value: float, integer: bool) -> str:
    return str(int(value)) if integer else repr(float(value))


def cli_args(spec: SearchSpec) -> list[str]:
    """The `search` command's flags for this spec (the engine is the lab's, from its settings)."""
    w = spec.workload
    space = spec.space
    args = ["--param", spec.param, "--objective", spec.objective]
    args += ["--range", f"{_bound(space.lo, space.integer)}:{_bound(space.hi, space.integer)}"]
    args += ["--budget-runs", str(spec.budget_runs), "--coarse", str(spec.coarse)]
    for name, value in spec.base_config.items():
        args += ["--set", f"{name}={format_value(value)}"]
    if spec.slo_ms:
        args += [
            "--goodput",
            *(f"{name}:{format_value(limit)}" for name, limit in spec.slo_ms.items()),
        ]
    args += ["--num-requests", str(w.num_requests), "--concurrency", str(w.concurrency)]
    args += ["--input-len", str(w.input_len), "--output-len", str(w.output_len)]
    args += ["--shared-prefix-len", str(w.shared_prefix_len), "--seed", str(w.seed)]
    args += ["--endpoint", w.endpoint, "--request-timeout", repr(w.request_timeout_s)]
    args += ["--stall-timeout", repr(w.stall_timeout_s)]
    if w.num_warmups is not None:
        args += ["--num-warmups", str(w.num_warmups)]
    if spec.base_url:
        args += ["--base-url", spec.base_url, *(["--model", spec.model] if spec.model else [])]
    return args


def busy_reason(db_path: Path) -> str | None:
    """Why nothing new may start now (what holds the machine, tuning.decide.holder), or None.
    Only reads: whoever asks reaps what died first (spawn_search below; a page calls
    tuning.decide.reaper.reap_dead at its top)."""
    holder = machine_holder(db_path)
    return None if holder is None else f"{holder.line()} is running; one at a time per machine"


def search_running(db_path: Path) -> bool:
    """Is a search running (New experiment waits for it)?"""
    if not db_path.exists():
        return False
    with connect(db_path, readonly=True) as db:
        return any(search_alive(row) for row in queries.list_searches(db, active_only=True))


def spawn_search(
    db_path: Path, spec: SearchSpec, *, author: str | None = None, host: str | None = None
) -> int:
    """Write the search's row and start its process; returns the row's id (SearchBusy when
    something runs, ValueError for a spec the search would refuse)."""
    spec.validate()
    reap(db_path)  # what died holds nothing
    reap_searches(db_path)
    reason = busy_reason(db_path)
    if reason:
        raise SearchBusy(reason)
    log_dir = lab_home() / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    with connect(db_path) as db:
        sid = repo.create_search(
            db,
            key=spec.key(),
            param=spec.param,
            spec_json=spec_json(spec),
            author=author,
            host=host,
        )
        log_path = log_dir / f"search-{repo.new_uid()}.log"  # never another DB's search log
        repo.update_search(db, sid, log_path=str(log_path))
    argv = [sys.executable, "-m", "tuning", "search", *cli_args(spec)]
    argv += ["--db", str(db_path), "--json", "--record", str(sid)]
    proc = spawn_detached(argv, log_path)
    with connect(db_path) as db:
        row = queries.get_search(db, sid)
        if row["status"] == "queued":  # the child has not taken it yet
            repo.update_search(
                db, sid, runner_pid=proc.pid, runner_start_time_s=process_start_time(proc.pid)
            )
    return sid


def stop_search(db_path: Path, search_id: int) -> None:
    """Ask a running search to stop: its current step's runner stops the server and marks the run
    cancelled, and SIGTERM ends the search process (its row then reads cancelled)."""
    with connect(db_path) as db:
        row = queries.get_search(db, search_id)
        mine = step_prefix(str(row["key"]))
        active = [
            int(e["id"])
            for e in queries.active_experiments(db)
            if str(e.get("name") or "").startswith(mine)
        ]
    for exp_id in active:
        cancel_experiment(db_path, exp_id)
    pid = int(row.get("runner_pid") or 0)
    if pid and search_alive(row):
        try:
            os.killpg(pid, signal.SIGTERM)  # its own session: the group id is its pid
        except ProcessLookupError:
            pass
