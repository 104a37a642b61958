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

Two phases share the budget of runs (tuning.decide.search.race): exploring (the coarse pass and
bisection, tuning.decide.search.strategy, at most half the budget) steers on each value's first
run: the objective of that run (tuning.compare's metric values; goodput recomputed from the stored
requests for the SLOs), no score when it failed or its p99 was over a limit. Then the race gives
repeats to the contenders, each repeat one more one-value step of the same value, and the
decision (tuning.decide.search.decision) is made from the race's looks: a choice with its interval
against the closest rival, a named tie with its tie-breaker, or undecided, never "chosen" from one
run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.failure_kinds import failure_words
from core.status import Status, is_active
from store import connect, queries
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import request_loader, run_metric_values
from tuning.compare.defaults import engine_default
from tuning.decide.search.decision import Default, decide_search
from tuning.decide.search.race import Race, ValueRuns, explore_budget, plan_race
from tuning.decide.search.slo import slo_key, under_limits
from tuning.decide.search.strategy import Observation, Space, Step, next_step, start_limit
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

    @property
    def coarse_points(self) -> int:
        return len(self.space.coarse(self.coarse))

    @property
    def explore_runs(self) -> int:
        """Runs exploring may spend (the rest of the budget races the contenders)."""
        return explore_budget(self.budget_runs, self.coarse_points)

    def validate(self) -> None:
        if self.metric not in METRIC_BY_KEY:
            known = ", ".join(sorted([*METRIC_BY_KEY, *OBJECTIVES]))
            raise ValueError(f"objective {self.objective!r}: one of {known}")
        if self.metric == "request_goodput" and not self.slo_ms:
            raise ValueError("objective goodput needs --goodput (e.g. ttft:200 tpot:50)")
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


@dataclass
class Stored:
    """What the store holds of one search's steps: one Observation a value (its first run with
    evidence: what exploring steers on), the log (one entry a step), each value's runs for the
    race, and the runs the budget has spent."""

    obs: list[Observation] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    values: list[ValueRuns] = field(default_factory=list)
    used: int = 0

    @property
    def run_ids(self) -> list[int]:
        return [int(e["run_id"]) for e in self.log]


@dataclass
class _Runs:
    """One value's runs as they are read, turned into a ValueRuns at the end."""

    objective: list[float] = field(default_factory=list)
    slo: dict[str, list[float]] = field(default_factory=dict)
    started: bool = True
    failed_after: int | None = None
    first_under_slo: bool | None = None

    def add(self, run: Mapping[str, Any], said: str, metric: float | None, slo: Any) -> None:
        if said != MEASURED:
            if self.failed_after is None:
                self.failed_after = len(self.objective)
            return
        p99s = [float(p) for name in slo if (p := run.get(slo_key(name))) is not None]
        if run["status"] != Status.DONE or metric is None or len(p99s) < len(slo):
            return  # tried (suspect, or a number missing): no measurement, no failure
        if not self.objective:
            self.first_under_slo = under_limits(run, slo)
        self.objective.append(float(metric))
        for name, p99 in zip(slo, p99s, strict=True):
            self.slo.setdefault(name, []).append(p99)

    def value_runs(self, value: float) -> ValueRuns:
        slo = {k: tuple(v) for k, v in self.slo.items()}
        return ValueRuns(
            value,
            tuple(self.objective),
            slo,
            self.started,
            self.failed_after,
            self.first_under_slo,
        )


def observations(db_path: Path, spec: SearchSpec, key: str | None = None) -> Stored:
    """The steps of this search (or of the stored `key`) found in the store, in order. Each
    step's runs with evidence count (one a step); a step whose run is still open is in the log
    (the step in progress) but says nothing yet."""
    prefix = f"{NAME_PREFIX}{key or spec.key()}:"
    sign = 1.0 if METRIC_BY_KEY[spec.metric].better == "higher" else -1.0
    out = Stored()
    per_value: dict[float, _Runs] = {}
    if not db_path.exists():
        return out
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
            value = float(exp["values"][0])
            for run in said or open_[-1:]:
                metric = run_metric_values(run, spec.slo_ms, loader).get(spec.metric)
                under = under_limits(run, spec.slo_ms)
                if said:
                    out.used += 1
                    if value not in per_value:  # the first run steers exploring
                        per_value[value] = _Runs(started=evidence(run) != NO_START)
                        meets = not spec.slo_ms or under is True  # one run: it steers, no more
                        ok = run["status"] == Status.DONE and metric is not None and meets
                        score = sign * metric if ok and metric is not None else None
                        out.obs.append(Observation(value, score, evidence(run) != NO_START))
                    per_value[value].add(run, evidence(run), metric, spec.slo_ms)
                out.log.append(
                    {
                        "step": len(out.log) + 1,
                        "value": value,
                        "why": exp.get("notes") or "",
                        "run_id": run["id"],
                        "status": run["status"],
                        "failure_kind": run.get("failure_kind"),
                        spec.metric: metric,
                        **{slo_key(n): run.get(slo_key(n)) for n in spec.slo_ms},
                        "under_slo": under,  # this run's p99s under the limits: a fact, no verdict
                        "meets_slo": None,  # the value's SLOs, judged on its interval (annotate)
                    }
                )
    out.values = [r.value_runs(v) for v, r in per_value.items()]
    return out


def next_action(spec: SearchSpec, stored: Stored) -> tuple[Step, Race | None]:
    """The next step (exploring, else the race) and the race so far (None while exploring)."""
    step = next_step(spec.space, stored.obs, budget_runs=spec.explore_runs, coarse=spec.coarse)
    if step.value is not None and stored.used < spec.budget_runs:
        return step, None
    better = METRIC_BY_KEY[spec.metric].better
    race = plan_race(
        stored.values,
        better,
        spec.slo_ms,
        race_runs=spec.budget_runs - len(stored.obs),
        budget_left=spec.budget_runs - stored.used,
    )
    if race.next:
        return Step(race.next[0], race.why), race
    explored = step.why.replace(
        f"the budget of {spec.explore_runs} runs is", f"its {spec.explore_runs} runs are"
    )
    return Step(None, f"exploring: {explored}; race: {race.why}"), race


def judged(
    db_path: Path, spec: SearchSpec, key: str | None = None
) -> tuple[Stored, Race, dict[str, Any]]:
    """The stored steps, the race they make and its decision (values typed as the parameter
    takes them); the log annotated with each value's SLO state. What `run_search` stores as its
    result, and what a search still running shows so far."""
    stored = observations(db_path, spec, key)
    _, race = next_action(spec, stored)
    if race is None:  # still exploring: the race as it would stand now
        race = plan_race(
            stored.values,
            METRIC_BY_KEY[spec.metric].better,
            spec.slo_ms,
            race_runs=spec.budget_runs - len(stored.obs),
            budget_left=0,
        )
    default = _default(db_path, spec, stored.run_ids)
    decision = decide_search(
        race, stored.values, METRIC_BY_KEY[spec.metric].better, spec.slo_ms, default
    )
    decision = typed_tree(decision, spec.space)
    states = {row["value"]: row["slo"]["state"] for row in decision["values"]}
    for entry in stored.log:
        state = states.get(_typed(entry["value"], spec.space))
        entry["slo_state"] = state
        entry["meets_slo"] = (
            None if not spec.slo_ms else {"met": True, "failed": False}.get(str(state))
        )
    return stored, race, decision


def _default(db_path: Path, spec: SearchSpec, run_ids: list[int]) -> Default | None:
    """vLLM's default of the parameter for the engine the steps ran on (the tie-breaker)."""
    if not run_ids or not db_path.exists():
        return None
    with connect(db_path, readonly=True) as db:
        found = engine_default(db, spec.param, queries.load_runs(db, run_ids))
    return Default(found.value, found.source) if found.known else None


_VALUE_KEYS = frozenset({"value", "chosen", "leader", "against"})
_LIST_KEYS = frozenset({"tie", "contenders", "entrants", "left"})


def typed_tree(data: Any, space: Space) -> Any:
    """A decision with every parameter value typed as the parameter takes it."""
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            if k in _VALUE_KEYS and isinstance(v, float):
                out[k] = _typed(v, space)
            elif k in _LIST_KEYS and isinstance(v, list):
                out[k] = [_typed(x, space) if isinstance(x, float) else x for x in v]
            else:
                out[k] = typed_tree(v, space)
        return out
    if isinstance(data, list):
        return [typed_tree(x, space) for x in data]
    return data


def _unmeasured(db_path: Path, exp_id: int, step: str) -> StepUnmeasured | None:
    """The error for a step whose experiment measured nothing, saying why ('run 7 failed
    (port already in use: ...)'), or None when one of its runs says something of its value."""
    with connect(db_path, readonly=True) as db:
        runs = queries.list_runs(db, exp_id, True)
    if any(evidence(r) != NOTHING for r in runs):
        return None
    last = runs[-1] if runs else {}
    kind = failure_words(last.get("failure_kind"))  # in words, as the step lines say it
    why = ": ".join(str(x) for x in (kind, last.get("failure_reason")) if x)
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
        stored = observations(db_path, spec)
        step, _ = next_action(spec, stored)
        if step.value is None:
            break
        value: Any = int(step.value) if spec.space.integer else step.value
        say("step", {"step": stored.used + 1, "value": value, "why": step.why})
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
        step_name = f"search step {stored.used + 1}, {p.name} = {format_value(value)},"
        if (unmeasured := _unmeasured(db_path, exp_id, step_name)) is not None:
            raise unmeasured
    return result_of(db_path, spec, step.why)


def result_of(db_path: Path, spec: SearchSpec, stopped: str | None) -> dict[str, Any]:
    """The search's result from its stored steps, with its decision (`judged`)."""
    stored, _, decision = judged(db_path, spec)
    limit = start_limit(stored.obs)
    chosen = decision["chosen"]
    row = next((r for r in decision["values"] if r["value"] == chosen), None)
    return {
        "param": get_param(spec.param).name,
        "range": [spec.space.lo, spec.space.hi],
        "objective": spec.metric,
        "better": METRIC_BY_KEY[spec.metric].better,
        "slo_ms": spec.slo_ms,
        "search_key": spec.key(),
        # the parameter's value (None unless decided or a named tie); its objective's mean
        # over its runs is chosen_objective, with the interval of that mean
        "chosen": chosen,
        "chosen_objective": row["mean"] if row else None,
        "interval": row["interval"] if row else None,
        "decision": decision,
        "budget": {"runs": spec.budget_runs, "explore": spec.explore_runs, "used": stored.used},
        "runs": stored.run_ids,
        # the largest value that started below the smallest that did not (None: all started)
        "start_limit": None
        if limit is None
        else {"starts": _typed(limit[0], spec.space), "fails": _typed(limit[1], spec.space)},
        "stopped": stopped,
        "log": stored.log,
    }


def _typed(value: float | None, space: Space) -> Any:
    return int(value) if value is not None and space.integer else value
