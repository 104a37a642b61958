"""The driver's loop on the fleet: `run_on_fleet` is an executor (tuning.experiment.runner.Executor)
that the caller hands the runner instead of its local loop; the fleet depends on the experiment
layer, never the reverse.

Each job of the plan goes to a free slot (tuning.decide.fleet.schedule.pick) as one Ray actor
(tuning.decide.fleet.worker.RunWorker) pinned to the slot's node, with the slot resource and K
GPUs. The
driver creates the run row when it dispatches (the Live page sees it at once), polls each worker's
phase, and, when a worker returns, writes its rows and placement: it stays the only writer of the
lab's database. A worker or node lost mid-run is a result: the run is stored as failed with kind
`worker_lost` and retried once, on another node when there is one. Cancel asks every worker to
stop (each stops its server by group); what does not answer in time is killed, and its guard
stops its servers.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core.clock import now_iso
from core.status import Status, suspect_reasons
from store import repo
from store.transfer import experiment_row, store_run_rows
from tuning.decide.fleet import SLOT_RESOURCE, FleetError, import_ray, swallowed
from tuning.decide.fleet.cluster import Fleet, FleetOptions, open_fleet, runtime_env
from tuning.decide.fleet.placement import placement_columns
from tuning.decide.fleet.schedule import History, Job, Slot, jobs_for, pick
from tuning.decide.fleet.worker import MAX_CONCURRENCY
from tuning.experiment.run_unit import new_run_fields

if TYPE_CHECKING:
    from tuning.experiment.runner import ExperimentRunner

POLL_S = 1.0
CANCEL_GRACE_S = 60.0
LOST_HINT = (
    "The worker running this run (or its node) died mid-run: killed, out of memory, or its node "
    "left the cluster. The run was retried once on another slot; its servers were stopped by "
    "the worker's guard."
)


@dataclass
class Flight:
    job: Job
    slot: Slot
    actor: Any
    ref: Any
    run_id: int
    status_ref: Any = None


class FleetDriver:
    """Runs the plan of `runner`'s experiment over `fleet`'s slots; returns the run ids."""

    def __init__(self, runner: ExperimentRunner, fleet: Fleet):
        from tuning.decide.fleet.worker import RunWorker

        ray = import_ray()
        self.ray: Any = ray
        self.runner = runner
        self.fleet = fleet
        self.experiment = experiment_row(runner.db, runner.experiment_id)  # what workers get
        self.remote_worker: Any = ray.remote(RunWorker)
        config = runner.exp.get("config") or {}
        self.gpus = fleet.gpus_per_run(int(config.get("tensor-parallel-size") or 1))
        self.flights: dict[Any, Flight] = {}
        self.actors: dict[Slot, Any] = {}
        self.run_ids: list[int] = []
        self.uids: dict[int, str] = {}  # run id -> uid, which the worker's run keeps
        self.done = 0
        self.total = 0

    # -- dispatch -------------------------------------------------------------------------------
    def _create_run(self, job: Job, slot: Slot) -> int:
        """The run's row, as the run unit writes it (tuning.experiment.run_unit), dispatched."""
        fields = new_run_fields(self.runner.exp, job.seq, job.value, job.repeat, None)
        fields.update(
            phase="dispatched",
            node_id=slot.node_id,
            node_host=slot.host,
            slot=slot.name,
            attempt=job.attempt,
        )
        run_id = repo.create_run(self.runner.db, **fields)
        self.uids[run_id] = str(fields["uid"])
        return run_id

    def _new_actor(self, slot: Slot) -> Any:
        """The worker of `slot`: pinned to its node, the slot resource and K GPUs; it runs the
        slot's runs one after another (a new one replaces it when it is lost)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return self.remote_worker.options(
            max_concurrency=MAX_CONCURRENCY,
            num_cpus=0,
            num_gpus=self.gpus,
            resources={SLOT_RESOURCE: 1},
            scheduling_strategy=NodeAffinitySchedulingStrategy(slot.node_id, soft=False),
            max_restarts=0,
            runtime_env=runtime_env(slot),
        ).remote()

    def _dispatch(self, job: Job, slot: Slot) -> None:
        run_id = self._create_run(job, slot)
        actor = self.actors.get(slot) or self._new_actor(slot)
        self.actors[slot] = actor
        payload = {
            "experiment": self.experiment,
            "run_id": run_id,
            "uid": self.uids[run_id],
            "seq": job.seq,
            "value": job.value,
            "repeat": job.repeat,
            "slot": slot.name,
            "gpus_per_run": self.gpus,
            "log_dir": str(self.runner.unit.log_dir),
            "start_timeout": self.runner.start_timeout,
        }
        ref = actor.run.remote(payload)
        self.flights[ref] = Flight(job, slot, actor, ref, run_id)
        self.run_ids.append(run_id)
        self.runner.progress("dispatched", {"run_id": run_id, "slot": slot.name})

    # -- results --------------------------------------------------------------------------------
    def _finish(self, flight: Flight, pending: list[Job]) -> str | None:
        """Store what a finished worker returned; the failure kind when it returned nothing."""
        from ray.exceptions import RayError, RayTaskError

        db = self.runner.db
        kind = None
        try:
            rows = self.ray.get(flight.ref)
        except RayTaskError as exc:  # the worker's own code raised: a lab bug, not a lost worker
            kind = "worker_error"
            self._fail(flight, "worker_error", str(exc)[-2000:], traceback.format_exc()[-4000:])
        except RayError as exc:
            kind = "worker_lost"
            self._fail(flight, "worker_lost", f"{type(exc).__name__}: {exc}"[:2000], "")
            if flight.job.attempt == 1 and not self.runner.live.cancel.is_set():
                retry = Job(flight.job.seq, flight.job.value, flight.job.repeat, 2)
                retry.avoid_node = flight.slot.node_id
                pending.insert(0, retry)
                self.total += 1
                repo.update_experiment(db, self.runner.experiment_id, runs_total=self.total)
        else:
            store_run_rows(db, flight.run_id, rows)
            placement = rows.get("placement") or {}
            repo.update_run(db, flight.run_id, **placement_columns(placement, flight.job.attempt))
            if rows["run"].get("status") == Status.FAILED:
                self.runner.progress(
                    "run_failed",
                    {
                        "run_id": flight.run_id,
                        "kind": rows["run"].get("failure_kind"),
                        "reason": rows["run"].get("failure_reason"),
                    },
                )
            elif rows["run"].get("status") == Status.SUSPECT:  # its numbers failed a check
                reasons = suspect_reasons(rows["run"])
                self.runner.progress("run_suspect", {"run_id": flight.run_id, "reasons": reasons})
        self.flights.pop(flight.ref, None)
        if kind is not None:  # a lost or broken worker is not reused
            self._release(flight.slot)
        self.done += 1
        repo.update_experiment(db, self.runner.experiment_id, runs_done=self.done)
        self.runner.progress(
            "run_done", {"done": self.done, "total": self.total, "run_id": flight.run_id}
        )
        return kind

    def _fail(self, flight: Flight, kind: str, reason: str, log_tail: str) -> None:
        hint = LOST_HINT if kind == "worker_lost" else "The fleet worker raised; see log tail."
        repo.update_run(
            self.runner.db,
            flight.run_id,
            status=Status.FAILED,
            phase=Status.FAILED,
            finished_at=now_iso(),
            failure_kind=kind,
            failure_reason=reason,
            failure_hint=hint,
            log_tail=log_tail or None,
        )
        self.runner.progress(
            "run_failed", {"run_id": flight.run_id, "kind": kind, "reason": reason}
        )

    def _release(self, slot: Slot) -> None:
        """Stop the slot's worker (its guard first, when it still answers) and forget it."""
        actor = self.actors.pop(slot, None)
        if actor is None:
            return
        try:
            self.ray.get(actor.close.remote(), timeout=10)
        except Exception as exc:  # a worker already gone: killed below all the same
            swallowed(f"closing the worker of slot {slot} failed; killing it", exc)
        self.ray.kill(actor)

    # -- the loop -------------------------------------------------------------------------------
    def _poll_phases(self) -> None:
        """Each worker's phase onto its run row (the Live page's view of runs in flight)."""
        done_total = [0, 0]
        for flight in list(self.flights.values()):
            if flight.status_ref is not None:
                ready, _ = self.ray.wait([flight.status_ref], timeout=0)
                if ready:
                    try:
                        state = self.ray.get(flight.status_ref)
                    except Exception as exc:  # asked again on the next poll
                        swallowed(f"run {flight.run_id}'s status from Ray", exc)
                        state = None
                    if state:
                        repo.update_run(self.runner.db, flight.run_id, phase=state["phase"])
                        done_total[0] += int(state.get("requests_done") or 0)
                        done_total[1] += int(state.get("requests_total") or 0)
                    flight.status_ref = None
            if flight.status_ref is None:
                flight.status_ref = flight.actor.status.remote()
        self.runner.set_live(
            phase=f"fleet: {len(self.flights)} in flight",
            requests_done=done_total[0],
            requests_total=done_total[1],
        )

    def run(self, plan: list[tuple[Any, int]], todo: list[int] | None = None) -> list[int]:
        try:
            return self._run(plan, todo)
        finally:
            for slot in list(self.actors):
                self._release(slot)

    def _run(self, plan: list[tuple[Any, int]], todo: list[int] | None) -> list[int]:
        pending = jobs_for(plan, todo)
        self.done = len(plan) - len(pending)  # a resume: the runs already finished count
        self.total = len(plan)
        history = History()
        slots = self.fleet.slots()
        if not slots:
            raise FleetError(
                f"no slot on the fleet: no alive node declares the `{SLOT_RESOURCE}` resource"
            )
        cancel_at: float | None = None
        while pending or self.flights:
            cancel = self.runner.live.cancel.is_set()
            if cancel and cancel_at is None:
                cancel_at = time.monotonic()
                pending.clear()
                for flight in self.flights.values():
                    flight.actor.cancel.remote()
            if cancel_at is not None and time.monotonic() - cancel_at > CANCEL_GRACE_S:
                for flight in list(self.flights.values()):
                    self._fail(flight, "cancelled", "did not stop within the grace", "")
                    self.flights.pop(flight.ref, None)
                    self._release(flight.slot)
                break
            busy = {f.slot for f in self.flights.values()}
            nodes = {s.node_id for s in slots}
            for slot in slots:
                if slot not in busy and pending:
                    job = pick(pending, slot, history, nodes)
                    if job is not None:
                        self._dispatch(job, slot)
            if not self.flights:
                if pending:  # nothing can run them (every slot's node is gone)
                    raise FleetError("jobs left but no slot can take them")
                break
            ready, _ = self.ray.wait(list(self.flights), num_returns=1, timeout=POLL_S)
            for ref in ready:
                if self._finish(self.flights[ref], pending) == "worker_lost":
                    slots = self.fleet.slots() or slots  # a lost node's slots are gone
            self._poll_phases()
        return self.run_ids


def run_on_fleet(
    runner: ExperimentRunner, plan: list[tuple[Any, int]], todo: list[int]
) -> list[int]:
    """The fleet's executor: open the fleet the experiment asked for, run the plan's positions
    `todo` (every one without a finished run, so a resume picks up from the store), close it."""
    if not todo:
        return []
    options = FleetOptions.from_dict(runner.exp.get("fleet") or {})
    with open_fleet(options) as fleet:
        return FleetDriver(runner, fleet).run(plan, todo)
