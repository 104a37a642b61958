"""Repeat until decided: `experiment --repeats auto [--max-repeats N] [--budget-minutes M]`.

The experiment starts like any other with `Design.min_repeats` interleaved rounds (the runner's
ordinary schedule). Then `extend` asks the stopping rule (tuning.compare.sequential.plan_next)
what the stored runs leave undecided against the baseline (the first value) and runs the rounds it
asks for, counterbalanced (baseline, then each undecided value; every other round reversed, as
`plan.schedule` orders them), until every value is decided, cannot
be decided within max_repeats, or the time budget is spent. Everything it needs is in the store
(the runs so far and the experiment's settings), so a resumed experiment picks up where it was;
each step's plan is stored in `experiments.repeats_plan_json` and reported through `progress`.

The time budget counts the wall time of the experiment's runs (restarts included), not the clock,
so time spent stopped does not count; a round is added only when the estimate (the run's start,
load and the rest, from this experiment's runs, and the last server's stop) says it fits in what
is left, and the stored plan says so in words. The first rounds always run: a verdict needs two
runs a side.
A value the engine did not apply (runs.config_mismatch_json) is never repeated: more runs of a
configuration that was not run cannot decide anything about it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from sqlite_utils import Database

from core.status import Status
from store import queries, repo
from tuning.compare.catalog import METRICS
from tuning.compare.primaries import Primaries
from tuning.compare.sequential import Design, Plan, plan_next
from tuning.engine.params import format_value
from tuning.experiment import switch_cost as sw
from tuning.experiment.estimate import (
    Costs,
    about,
    blend,
    costs_of,
    restarts,
    span_s,
    with_switches,
)
from tuning.experiment.order import counterbalanced
from tuning.experiment.size import DEFAULT_MAX_REPEATS

# Runs in one of these states count as tried; a cancelled or unfinished one does not.
_TRIED = frozenset({Status.DONE, Status.SUSPECT, Status.FAILED})


@dataclass(frozen=True)
class AutoRepeats:
    """The settings of `--repeats auto`, as stored on the experiment row."""

    max_repeats: int = DEFAULT_MAX_REPEATS
    budget_minutes: float | None = None

    def __post_init__(self) -> None:
        self.design()  # refuses a max_repeats under the minimum
        if self.budget_minutes is not None and not self.budget_minutes > 0:
            raise ValueError("--budget-minutes must be more than 0")

    def design(self) -> Design:
        return Design(max_repeats=self.max_repeats)

    @property
    def first_rounds(self) -> int:
        """The interleaved rounds every auto experiment starts with."""
        return self.design().min_repeats

    def columns(self) -> dict[str, Any]:
        """The experiment row's columns for these settings."""
        return {
            "repeats_auto": 1,
            "max_repeats": self.max_repeats,
            "budget_minutes": self.budget_minutes,
        }

    @classmethod
    def of(cls, exp: Mapping[str, Any]) -> AutoRepeats | None:
        """The settings of a stored experiment; None unless it repeats until decided."""
        if not exp.get("repeats_auto"):
            return None
        budget = exp.get("budget_minutes")
        return cls(
            max_repeats=int(exp.get("max_repeats") or DEFAULT_MAX_REPEATS),
            budget_minutes=float(budget) if budget else None,
        )


def _seconds(run: Mapping[str, Any]) -> float | None:
    elapsed = span_s(run.get("started_at"), run.get("finished_at"))
    return None if elapsed is None else max(0.0, elapsed)


def _suspect(run: Mapping[str, Any]) -> bool:
    return run.get("status") == Status.SUSPECT


def _unmeasured(run: Mapping[str, Any]) -> dict[str, Any]:
    """A suspect run as the stopping rule sees it: tried, with no metric to count."""
    return {**run, **{m.key: None for m in METRICS}}


def _not_applied(run: Mapping[str, Any]) -> bool:
    mismatch = run.get("config_mismatch")
    return isinstance(mismatch, list) and bool(mismatch)


def plan_for(
    values: Sequence[Any],
    runs: Sequence[Mapping[str, Any]],
    settings: AutoRepeats,
    costs: Costs | None = None,
    restart: bool = True,
    primaries: Primaries | None = None,
) -> Plan:
    """The next step for an experiment of `values` (the first is the baseline) given its stored
    runs in run order: a pure function of what is stored. The rule decides on the experiment's
    `primaries` (its objective and guards; the defaults unless given). A round is added only
    when the estimate (tuning.experiment.estimate: `costs`, the engine's earlier runs, with this
    experiment's finished runs in their place) says it fits in the budget left."""
    labels = [format_value(v) for v in values]
    tried = [r for r in runs if r.get("status") in _TRIED]
    by_label: dict[str, list[Mapping[str, Any]]] = {label: [] for label in labels}
    for run in tried:
        if run.get("value") in by_label:  # a suspect run is a try without a measurement
            by_label[str(run["value"])].append(_unmeasured(run) if _suspect(run) else run)
    base_label, *others = labels
    unapplied = {label for label in labels if any(_not_applied(r) for r in by_label[label])}
    if base_label in unapplied:
        return Plan(0, (), True, "the engine did not apply the baseline's value", None, None, False)
    candidates = {label: by_label[label] for label in others if label not in unapplied}
    timed = [s for s in map(_seconds, tried) if s is not None]
    model = blend(costs or NO_MODEL, tried)
    per_run = model.run_s(restart) if model.measured_runs or costs else None
    if per_run is not None and model.switch_every:  # which of the next rounds' runs switch
        done = min(len(rows) for rows in by_label.values())
        per_run = sw.rounds_run_s(model, done, settings.design().looks(), restart)
    budget_left = None
    if settings.budget_minutes is not None:  # the last server's stop counts too
        budget_left = settings.budget_minutes * 60.0 - sum(timed) - model.experiment_s
    plan = plan_next(
        by_label[base_label],
        candidates,
        (primaries or Primaries()).keys,
        design=settings.design(),
        seconds_per_run=per_run,
        budget_left_s=budget_left if per_run is not None else None,
    )
    if unapplied and plan.stop and not candidates:
        return Plan(0, (), True, "the engine did not apply the values", None, None, False)
    if budget_left is not None and per_run is not None and (plan.stop or plan.final_look):
        return _said(plan, per_run, budget_left, model)
    return plan


# The model before any run: nothing known (plan_for is then told nothing of the time).
NO_MODEL = Costs(0.0, 0.0, 0.0, 0.0, "no runs measured")


def _said(plan: Plan, per_run: float, left: float, model: Costs) -> Plan:
    """The plan's reason with the estimate behind a budget decision, for the stored plan."""
    if plan.reason == "the time budget is spent":
        rnd = per_run * (1 + len([v for v in plan.values.values() if v.state == "budget"]))
        why = (
            f"the time budget is spent: one more round needs {about(rnd)} by the estimate, "
            f"{about(max(0.0, left))} of the budget is left ({model.describe()})"
        )
        return replace(plan, reason=why)
    if plan.final_look and not plan.stop:
        return replace(
            plan, reason=f"{plan.reason}; the budget affords no more ({model.describe()})"
        )
    return plan


class _Runner(Protocol):
    """What `extend` uses of tuning.experiment.runner.ExperimentRunner."""

    db: Database
    experiment_id: int
    exp: dict[str, Any]
    live: Any  # .cancel: a threading.Event set when the user asks to stop

    def progress(self, event: str, data: dict[str, Any]) -> None: ...
    def run_positions(self, plan: list[tuple[Any, int]], todo: list[int]) -> list[int]: ...


def extend(runner: _Runner) -> list[int]:
    """Add interleaved rounds until the stopping rule says stop; returns the new runs' ids."""
    settings = AutoRepeats.of(runner.exp)
    if settings is None:
        return []
    values = list(runner.exp["values"])
    by_label = {format_value(v): v for v in values}
    restart = restarts(runner.exp)
    primaries = Primaries.of(runner.exp)
    new_ids: list[int] = []
    while not runner.live.cancel.is_set():
        runs = queries.list_runs(runner.db, runner.experiment_id, include_hidden=True)
        # the repeats that switch resident servers cost a switch, not a restart (as the runner
        # stored it now: one that fell back restarts from then on)
        now = queries.get_experiment(runner.db, runner.experiment_id)
        costs = with_switches(runner.db, now, costs_of(runner.db, runner.exp))
        plan = plan_for(values, runs, settings, costs, restart, primaries)
        repo.update_experiment(
            runner.db,
            runner.experiment_id,
            repeats_plan_json=plan.to_json(),
            runs_total=len(runs) + plan.runs,
        )
        runner.progress("repeats", plan.to_json())
        if plan.stop:
            break
        first = max((int(r.get("seq") or 0) for r in runs), default=-1) + 1
        counts = {label: sum(r.get("value") == label for r in runs) for label in by_label}
        base_label = format_value(values[0])
        # The rounds continue the counterbalanced order: the baseline runs once a round, so its
        # runs so far are the rounds so far (the parity of the next round).
        jobs: list[tuple[Any, int]] = []
        for label, _ in counterbalanced(
            [base_label, *plan.pending], plan.rounds, counts[base_label]
        ):
            jobs.append((by_label[label], counts[label]))
            counts[label] += 1
        # The rounds go where the first ones went (this machine or the fleet): positions before
        # `first` are stored runs, placeholders here that the executor never runs.
        positions: list[tuple[Any, int]] = [(None, 0)] * first + jobs
        todo = list(range(first, len(positions)))
        new_ids += runner.run_positions(positions, todo)
    return new_ids


def repeats_lines(plan: Mapping[str, Any] | None) -> list[str]:
    """The stored plan in words, one line per value: how each comparison ended."""
    if not plan:
        return []
    lines = [f"repeat until decided: {plan.get('reason', '')}"]
    for label, value in (plan.get("values") or {}).items():
        verdicts = ", ".join(f"{k} {v}" for k, v in (value.get("verdicts") or {}).items())
        why = f"; {value['why']}" if value.get("why") else ""
        lines.append(
            f"  {label}: {value.get('state')} after {value.get('runs')} runs "
            f"({verdicts or 'no verdict yet'}){why}"
        )
    return lines
