"""An experiment, value by value: restart vLLM with the one changed parameter, warm up, load while
sampling, store; a failed value is a result and the experiment goes on.

The runner is its own process (`python -m tuning run-experiment`, started by the supervisor in its
own session) so it outlives the page that asked for it. SQLite is its only output: progress, phase,
heartbeat, runs, per-request rows and samples. It owns one connection per thread that writes (its
own, the heartbeat's, the telemetry sink's) and closes each when that thread is done.

One value's run is `RunUnit.run` (tuning.experiment.run_unit), whoever runs it. Where the runs go
is the caller's choice: an `Executor` (the local loop below by default; the fleet's, in
tuning.decide.fleet.executor, which depends on this module and never the reverse).

Every way out writes a terminal status: a value that raises fails that run (with its kind) and the
experiment goes on; Ctrl-C or SIGTERM marks the experiment and its open run cancelled; anything
else marks them failed with the reason. Finished runs are never run again: the runner takes the
schedule's pairs that have no finished run yet, which is also how `--resume` works.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from core.status import Status
from store import repo
from tuning.experiment import exits, outcome, repeats, spool, time_spent
from tuning.experiment.bookkeeping import Bookkeeping, Progress
from tuning.experiment.decision import store_decision
from tuning.experiment.lock import RunnerBusy, machine_lock
from tuning.experiment.order import counterbalanced
from tuning.experiment.plan import is_imported, refuse_imported
from tuning.experiment.run_unit import RunUnit
from tuning.experiment.watch import Heartbeat

HEARTBEAT_S = 2.0


# Where an experiment's runs go: given the runner, the plan and the plan positions still to run,
# run them and return the new runs' ids. `run_locally` by default; the fleet's is in
# tuning.decide.fleet.
Executor = Callable[["ExperimentRunner", list[tuple[Any, int]], list[int]], list[int]]


def run_locally(
    runner: ExperimentRunner, plan: list[tuple[Any, int]], todo: list[int]
) -> list[int]:
    """One value after another on this machine, through the runner's own run unit."""
    run_ids: list[int] = []
    for i, seq in enumerate(todo):
        if runner.live.cancel.is_set():
            break
        value, repeat = plan[seq]
        later = todo[i + 1 : i + 2]  # its server may be spawned ahead (tuning.engine.prelaunch)
        runner.unit.next_at = plan[later[0]] if later else None
        run_ids.append(runner.unit.run(seq, value, repeat))
        done = sum(outcome.finished(r) for r in runner.runs())
        repo.update_experiment(runner.db, runner.experiment_id, runs_done=done)
        runner.progress("run_done", {"done": done, "total": len(plan), "run_id": run_ids[-1]})
    return run_ids


class ExperimentRunner(Bookkeeping):
    """Runs one stored experiment; use it as a context manager so its connection is closed."""

    def __init__(
        self,
        db_path: str | Path,
        experiment_id: int,
        progress: Progress | None = None,
        start_timeout: float = 300.0,
        executor: Executor = run_locally,
    ):
        super().__init__(db_path, experiment_id, progress)
        if is_imported(self.exp):  # an imported experiment's engine command never runs here
            self.db.conn.close()
            refuse_imported(self.exp)
        if self.exp.get("fleet") and executor is run_locally:
            self.db.conn.close()  # a fleet experiment run here would be another experiment
            raise ValueError(
                f"experiment {experiment_id} runs on the fleet: run it with "
                "`tuning-lab run-experiment`, which opens the fleet"
            )
        self.start_timeout = start_timeout
        self.executor = executor
        self.unit = RunUnit(self, start_timeout)

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> list[int]:
        """Run every (value, repeat) pair without a finished run; the experiment's status at the
        end: done, failed (every run failed, or the lab did; `error` says why) or cancelled."""
        exp = self.exp
        self._mark_running()
        self.unit.begin_window()  # the first run's window: from here to its end
        time_spent.store_estimate(self.db, self.experiment_id)  # compare prints it beside the time
        heartbeat = Heartbeat(self.db_path, self._beat, HEARTBEAT_S)
        heartbeat.start()
        run_ids: list[int] = []
        status, error = Status.DONE, None
        abort: BaseException | None = None
        try:
            plan = counterbalanced(list(exp["values"]), int(exp["repeats"] or 1))
            todo = outcome.remaining(plan, self.runs())
            run_ids = self.run_positions(plan, todo) if todo else []
            run_ids += repeats.extend(self)  # --repeats auto: more rounds until decided
            if self.live.cancel.is_set():
                status, error = Status.CANCELLED, "stopped by the user"
            else:
                status, error = outcome.experiment_verdict(self.runs())
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Interrupted
            status, error, abort = Status.CANCELLED, f"interrupted by {exits.signal_name(exc)}", exc
            raise
        except Exception as exc:  # the experiment row must say why it stopped
            status, error, abort = Status.FAILED, f"{type(exc).__name__}: {exc}", exc
            raise
        finally:
            with exits.signals_deferred():
                self._shut_down(heartbeat, status, error, abort)
        return run_ids

    def run_positions(self, plan: list[tuple[Any, int]], todo: list[int]) -> list[int]:
        """Run the plan's positions `todo` where the caller chose (this machine or the fleet)."""
        return self.executor(self, plan, todo)

    def _shut_down(
        self, heartbeat: Heartbeat, status: Status, error: str | None, abort: BaseException | None
    ) -> None:
        """Stop what runs, then write the terminal statuses whatever failed on the way."""
        steps: list[Callable[[], None]] = [self._phase_stopping, self._close_unit]
        for step in steps:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 (the statuses below must still be written)
                print(f"runner: while stopping: {type(exc).__name__}: {exc}", file=sys.stderr)
        heartbeat.stop()
        self._write_end(status, error, abort)
        self._decide()

    def _decide(self) -> None:
        """The experiment's decision record, by its own rule, once its status is final
        (tuning.experiment.decision); a failure here must not undo the terminal status."""

        def write() -> None:
            store_decision(self.db, self.experiment_id)

        try:
            exits.retry(write)
        except Exception as exc:  # noqa: BLE001 (readers then decide by the same rule)
            print(f"runner: while deciding: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _phase_stopping(self) -> None:
        self.phase("stopping")

    def _close_unit(self) -> None:
        """Stop the last server; its seconds are the experiment's, outside any run."""
        began = time.monotonic()
        try:
            self.unit.close()
        finally:
            time_spent.add_after_runs(self.db, self.experiment_id, time.monotonic() - began)


def _refuse_if_queued(db_path: str | Path, experiment_id: int, busy: RunnerBusy) -> None:
    """A queued experiment refused for a busy machine is failed, saying so (not queued for ever);
    one that another runner already runs is left alone."""
    from tuning.experiment.supervisor import settle

    settle(db_path, experiment_id, Status.FAILED, f"refused: {busy}; resume it when that one ends")


def run_experiment(
    db_path: str | Path,
    experiment_id: int,
    progress: Progress | None = None,
    start_timeout: float = 300.0,
    executor: Executor = run_locally,
) -> list[int]:
    """Run a stored experiment in this process, holding the machine lock throughout."""
    with ExitStack() as stack:
        try:
            mine = {"db": str(Path(db_path).resolve()), "experiment": experiment_id}
            stack.enter_context(machine_lock(holder=mine))  # pages name the holder from it
        except RunnerBusy as busy:
            _refuse_if_queued(db_path, experiment_id, busy)
            raise
        for line in spool.store_spooled(db_path):  # requests an earlier run could not store
            print(f"runner: {line}", file=sys.stderr, flush=True)
        stack.enter_context(exits.sigterm_interrupts())
        runner = stack.enter_context(
            ExperimentRunner(db_path, experiment_id, progress, start_timeout, executor)
        )
        return runner.run()
