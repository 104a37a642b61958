"""The runner's rows: its experiment's live fields (phase, progress, heartbeat, the Stop flag), each
run's end, and the terminal writes that must happen whatever stopped the loop."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlite_utils import Database

from core.clock import now_iso
from core.status import Status, is_active
from store import open_db, queries, repo
from tuning.engine.procs import process_start_time
from tuning.experiment import exits, outcome

Progress = Callable[[str, dict[str, Any]], None]


@dataclass
class Live:
    """What the heartbeat thread writes; the runner thread updates it."""

    phase: str = "starting"
    requests_done: int = 0
    requests_total: int = 0
    current_run_id: int | None = None
    cancel: threading.Event = field(default_factory=threading.Event)


class Bookkeeping:
    """The DB side of a runner: one connection (the runner thread's), the live fields the heartbeat
    writes, and every status write of the experiment and its runs."""

    def __init__(self, db_path: str | Path, experiment_id: int, progress: Progress | None):
        self.db_path = Path(db_path)
        self.db = open_db(self.db_path)  # the runner thread's connection, closed by close()
        self.experiment_id = experiment_id
        self.exp = queries.get_experiment(self.db, experiment_id)
        self.progress = progress or (lambda event, data: None)
        self.live = Live()
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.db.conn.close()

    # -- live fields ------------------------------------------------------------------------------
    def _beat(self, db: Database) -> None:
        with self._lock:
            fields = {
                "heartbeat_at": now_iso(),
                "phase": self.live.phase,
                "requests_done": self.live.requests_done,
                "requests_total": self.live.requests_total,
                "current_run_id": self.live.current_run_id,
            }
        repo.update_experiment(db, self.experiment_id, **fields)
        if queries.cancel_requested(db, self.experiment_id):
            self.live.cancel.set()

    def set_live(self, **fields: Any) -> None:
        """Set live fields (phase, requests_done, requests_total, current_run_id) together, under
        the lock the heartbeat reads them with."""
        with self._lock:
            for name, value in fields.items():
                if not hasattr(self.live, name):
                    raise AttributeError(f"no live field {name!r}")
                setattr(self.live, name, value)

    def phase(self, phase: str, run_id: int | None = None) -> None:
        with self._lock:
            self.live.phase = phase
            if run_id is not None:
                self.live.current_run_id = run_id
        if run_id is not None:
            repo.update_run(self.db, run_id, phase=phase)
        self._beat(self.db)
        self.progress("phase", {"phase": phase, "run_id": run_id})

    def runs(self) -> list[dict[str, Any]]:
        return queries.list_runs(self.db, self.experiment_id, include_hidden=True)

    def _mark_running(self) -> None:
        """This process runs the experiment now: its pid and start time, for the reaper."""
        repo.update_experiment(
            self.db,
            self.experiment_id,
            status=Status.RUNNING,
            phase="starting",
            started_at=self.exp.get("started_at") or now_iso(),
            finished_at=None,
            error=None,
            runner_pid=os.getpid(),
            runner_start_time_s=process_start_time(os.getpid()),
            heartbeat_at=now_iso(),
        )

    def finish_run(self, run_id: int, status: Status, **fields: Any) -> None:
        repo.update_run(
            self.db, run_id, status=status, phase=status, finished_at=now_iso(), **fields
        )

    def fail_run(
        self, run_id: int, kind: str, reason: str, hint: str, log_tail: str | None, **fields: Any
    ) -> None:
        self.finish_run(
            run_id,
            Status.FAILED,
            failure_kind=kind,
            failure_reason=reason,
            failure_hint=hint,
            log_tail=log_tail,
            **fields,
        )

    def _close_open_runs(self, abort: BaseException | None) -> None:
        """A run still `running` when the loop ended was interrupted or hit a lab error."""
        for run in self.runs():
            if not is_active(run["status"]):
                continue
            if abort is None or isinstance(abort, KeyboardInterrupt):
                reason = f"interrupted by {exits.signal_name(abort)}" if abort else "stopped"
                self.finish_run(int(run["id"]), Status.CANCELLED, failure_reason=reason)
            else:
                kind = outcome.exception_kind(abort)
                reason = f"{type(abort).__name__}: {abort}"[:2000]
                self.fail_run(int(run["id"]), kind, reason, outcome.HINTS[kind], log_tail="")

    def _write_end(self, status: Status, error: str | None, abort: BaseException | None) -> None:
        """The open run and the experiment get their terminal status, retried past a locked DB."""
        exits.retry(lambda: self._close_open_runs(abort))
        exits.retry(
            lambda: repo.update_experiment(
                self.db,
                self.experiment_id,
                status=status,
                error=error,
                phase=status,
                finished_at=now_iso(),
                heartbeat_at=now_iso(),
            )
        )
