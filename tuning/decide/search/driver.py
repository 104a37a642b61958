"""Search one parameter over a range with the lab's runner: each step is an ordinary one-value
experiment in the store (its notes say why the value was chosen), so the search can be read on
Runs and Compare like any other, and a stopped or crashed search resumes where it was: the steps
are found again by the search's key (parameter, range, objective, SLOs, workload, baseline).

What a step's run says of its value (`evidence`): measured (done), started without a usable
load (every request failed, or the engine died under load), did not start (invalid argument,
engine init, out of memory, start timeout: the only evidence of a start limit), or nothing: a
run cancelled or interrupted (Ctrl-C, SIGTERM), reaped after its process was killed
(`runner_died`), still open, or failed for the lab's own reason (`outcome.LAB_KINDS`). A value
with nothing is measured again on the next call and spends no run of the budget; a step that
measures nothing ends the search (StepUnmeasured) instead of trying the same value for ever.

A value's score: the objective of its run (tuning.compare's metric values; goodput recomputed from
the stored requests for the SLOs), None when it failed or broke an SLO (p99 of each SLO metric
above its limit). One run per value: the chosen value has no interval yet (repeat it with
`experiment --repeats auto` against its neighbours to decide).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.status import Status, is_active
from store import connect, queries
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import request_loader, run_metric_values
from tuning.decide.search.strategy import Observation, Space, Step, best, next_step, start_limit
from tuning.engine.params import format_value, get_param
from tuning.engine.spec import EngineSpec
from tuning.experiment.outcome import LAB_KINDS
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.experiment.supervisor import reap, settle
from tuning.measure.traffic.workload import Workload

OBJECTIVES = {"goodput": "request_goodput"}  # names the CLI accepts besides the metric keys
STARTUP = "time_to_healthy_s"  # an objective only where every value starts its own server
NAME_PREFIX = "search "
# Failures after the server was healthy: the value started, its load gave nothing usable.
AFTER_START = frozenset({"requests_failed", "engine_died"})
# What a step's run says of its value (`evidence`).
MEASURED, STARTED, NO_START, NOTHING = "measured", "started", "no_start", "nothing"


class StepUnmeasured(RuntimeError):
    """A step's run measured nothing (cancelled, interrupted, a lab failure); the search stops
    with its finished steps kept, and the same search run again measures the value anew.
    `cancelled`: the step was stopped by the user (the search ends cancelled, not failed)."""

    def __init__(self, message: str, cancelled: bool = False) -> None:
        super().__init__(message)
        self.cancelled = cancelled


@dataclass
class SearchSpec:
    param: str
    space: Space
    objective: str  # a metric key (tuning.compare.catalog), or "goodput"
    workload: Workload
    engine: EngineSpec | None
    base_config: dict[str, Any] = field(default_factory=dict)
    slo_ms: dict[str, float] = field(default_factory=dict)
    budget_runs: int = 8
    coarse: int = 4
    base_url: str | None = None
    model: str | None = None

    @property
    def metric(self) -> str:
        return OBJECTIVES.get(self.objective, self.objective)

    def validate(self) -> None:
        if self.metric not in METRIC_BY_KEY:
            known = ", ".join(sorted([*METRIC_BY_KEY, *OBJECTIVES]))
            raise ValueError(f"objective {self.objective!r}: one of {known}")
        if self.metric == "request_goodput" and not self.slo_ms:
            raise ValueError("objective goodput needs --slo (e.g. ttft:200 tpot:50)")
        if self.budget_runs < 2:
            raise ValueError("--budget-runs must be at least 2")
        p = get_param(self.param)
        if self.metric == STARTUP:
            _refuse_unstarted(p.name, p.restarts_server, self.base_url)

    def key(self) -> str:
        """What makes two searches the same search (and a later call a resume)."""
        facts = {
            "param": self.param,
            "range": [self.space.lo, self.space.hi],
            "objective": self.metric,
            "slo": self.slo_ms,
            "workload": self.workload.to_dict(),
            "config": self.base_config,
            "engine": self.engine.to_json() if self.engine else self.base_url,
        }
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:10]


def _refuse_unstarted(param: str, restarts: bool, base_url: str | None) -> None:
    """Startup time is an objective only where each value starts its own server: not on a server
    the lab attaches to, nor for a workload knob (its values run on one server, no restart)."""
    if base_url:
        raise ValueError(
            f"--objective {STARTUP}: an attached server (--base-url) is never started by the "
            "lab, so there is no start to time"
        )
    if not restarts:
        raise ValueError(
            f"--objective {STARTUP}: {param} is a workload parameter, run on one server without "
            "a restart, so its values have no start of their own to time"
        )


def _meets_slo(run: Mapping[str, Any], slo_ms: Mapping[str, float]) -> bool:
    for name, limit in slo_ms.items():
        p99 = run.get(f"p99_{name}_ms")
        if p99 is None or float(p99) > limit:
            return False
    return True


def evidence(run: Mapping[str, Any]) -> str:
    """What one step's run says of its value: MEASURED (done, or any other terminal status of a
    run that started), STARTED (healthy, but its load failed), NO_START (a failed start: evidence
    of a start limit) or NOTHING (still open, cancelled, interrupted, reaped as runner_died, or
    a lab failure: measured again, never evidence of anything)."""
    status = run.get("status")
    kind = run.get("failure_kind")
    if is_active(status) or status == Status.CANCELLED:
        return NOTHING
    if status != Status.FAILED:
        return MEASURED
    if kind in LAB_KINDS:
        return NOTHING
    return STARTED if kind in AFTER_START else NO_START


def observations(
    db_path: Path, spec: SearchSpec, key: str | None = None
) -> tuple[list[Observation], list[dict[str, Any]]]:
    """The steps of this search (or of the stored `key`) found in the store, in order:
    observations and the log. Each step's last run with evidence counts; a step whose run is
    still open is in the log (the step in progress) but not an observation."""
    prefix = f"{NAME_PREFIX}{key or spec.key()}:"
    sign = 1.0 if METRIC_BY_KEY[spec.metric].better == "higher" else -1.0
    obs: list[Observation] = []
    log: list[dict[str, Any]] = []
    if not db_path.exists():
        return obs, log
    with connect(db_path, readonly=True) as db:
        loader = request_loader(db)
        mine = [
            e for e in queries.list_experiments(db, True) if (e["name"] or "").startswith(prefix)
        ]
        for exp in sorted(mine, key=lambda e: int(e["id"])):
            runs = queries.list_runs(db, exp["id"], True)
            said = [r for r in runs if evidence(r) != NOTHING]
            open_ = [r for r in runs if is_active(r["status"])]
            if not said and not open_:
                continue
            run = (said or open_)[-1]
            value = float(exp["values"][0])
            metric = run_metric_values(run, spec.slo_ms, loader).get(spec.metric)
            ok = run["status"] == Status.DONE and metric is not None
            slo_ok = ok and _meets_slo(run, spec.slo_ms)
            score = sign * float(metric) if ok and slo_ok and metric is not None else None
            if said:
                obs.append(Observation(value, score, evidence(run) != NO_START))
            log.append(
                {
                    "step": len(log) + 1,
                    "value": value,
                    "why": exp.get("notes") or "",
                    "run_id": run["id"],
                    "status": run["status"],
                    "failure_kind": run.get("failure_kind"),
                    spec.metric: metric,
                    "meets_slo": slo_ok if spec.slo_ms else None,
                }
            )
    return obs, log


def _unmeasured(db_path: Path, exp_id: int, step: str) -> StepUnmeasured | None:
    """The error for a step whose experiment measured nothing, saying why ('run 7 failed
    (port_in_use: ...)'), or None when one of its runs says something of its value."""
    with connect(db_path, readonly=True) as db:
        runs = queries.list_runs(db, exp_id, True)
    if any(evidence(r) != NOTHING for r in runs):
        return None
    last = runs[-1] if runs else {}
    why = ": ".join(str(x) for x in (last.get("failure_kind"), last.get("failure_reason")) if x)
    said = f"run {last['id']} {last['status']}" if last else "no run was written"
    return StepUnmeasured(
        f"{step} measured nothing: {said}"
        + (f" ({why[:300]})" if why else "")
        + "; the measured steps are kept: run the same search again to measure this value",
        cancelled=last.get("status") == Status.CANCELLED,
    )


def run_search(
    db_path: Path,
    spec: SearchSpec,
    progress: Callable[[str, dict[str, Any]], None] | None = None,
    start_timeout: float = 300.0,
) -> dict[str, Any]:
    """Run (or resume) the search to its end; the result as JSON-ready data."""
    spec.validate()
    say = progress or (lambda event, data: None)
    p = get_param(spec.param)
    if db_path.exists():  # a killed search's step: its run failed (runner_died), its server stopped
        reap(db_path)
    while True:
        obs, log = observations(db_path, spec)
        step: Step = next_step(spec.space, obs, budget_runs=spec.budget_runs, coarse=spec.coarse)
        if step.value is None:
            break
        value: Any = int(step.value) if spec.space.integer else step.value
        say("step", {"step": len(obs) + 1, "value": value, "why": step.why})
        exp_id = plan_experiment(
            db_path,
            ExperimentSpec.build(
                param=p.name,
                values=[value],
                workload=spec.workload,
                engine=spec.engine,
                base_config=spec.base_config,
                base_url=spec.base_url,
                model=spec.model,
                name=f"{NAME_PREFIX}{spec.key()}: {p.name} = {format_value(value)}",
            ),
        )
        try:
            with connect(db_path) as db:
                db.table("experiments").update(exp_id, {"notes": step.why})
            run_experiment(db_path, exp_id, start_timeout=start_timeout)
        except KeyboardInterrupt:  # before its runner began: cancelled, not queued for ever
            settle(db_path, exp_id, Status.CANCELLED, "interrupted before it started")
            raise
        step_name = f"search step {len(obs) + 1}, {p.name} = {format_value(value)},"
        if (unmeasured := _unmeasured(db_path, exp_id, step_name)) is not None:
            raise unmeasured
    top = best(obs)
    limit = start_limit(obs)
    chosen: Any = None
    if top is not None:
        chosen = _typed(top.value, spec.space)
    return {
        "param": p.name,
        "range": [spec.space.lo, spec.space.hi],
        "objective": spec.metric,
        "better": METRIC_BY_KEY[spec.metric].better,
        "slo_ms": spec.slo_ms,
        "search_key": spec.key(),
        "chosen": chosen,  # the parameter's value; its objective is chosen_objective
        "chosen_objective": next((e[spec.metric] for e in log if e["value"] == top.value), None)
        if top
        else None,
        "interval": None,  # one run per value: decide with --repeats auto around the choice
        "runs": [e["run_id"] for e in log],
        # the largest value that started below the smallest that did not (None: all started)
        "start_limit": None
        if limit is None
        else {"starts": _typed(limit[0], spec.space), "fails": _typed(limit[1], spec.space)},
        "stopped": step.why,
        "log": log,
    }


def _typed(value: float | None, space: Space) -> Any:
    return int(value) if value is not None and space.integer else value
