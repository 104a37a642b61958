"""An experiment's decision record (tuning.compare.decision), made by the rule that ran it and
stored on the experiment (`experiments.decision_json`) when its runner ends: fixed repeats by the
fixed-n test over its runs, `--repeats auto` by the stopping rule's looks over the same stored
runs the rule stopped on (tuning.experiment.repeats.plan_for, a pure function of them). Readers
take the stored record; an experiment still running, or stored before m017, gets the record its
own rule gives for the runs so far, never another test.

For an undecided objective the record carries what would decide it (`NextStep`): the more runs a
side the repeat estimate asks for, their time by the estimate (tuning.experiment.estimate), and
the limits to go on with (`experiment --resume ID --max-repeats N [--budget-minutes M]`; a
fixed-repeats experiment then goes on until decided, and its record becomes the sequential
rule's over all its runs).
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from sqlite_utils import Database

from core.status import Status, is_active
from store import queries, repo
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.compare.decision import (
    ALPHA,
    Decision,
    NextStep,
    decide_fixed,
    decide_sequential,
    with_next_step,
)
from tuning.compare.primaries import Primaries
from tuning.compare.resident_words import resident_note
from tuning.compare.stats import MARGIN
from tuning.engine.params import ParamError, format_value
from tuning.experiment.estimate import (
    Costs,
    about,
    blend,
    costs_of,
    restarts,
    runs_seconds,
    span_s,
    with_switches,
)
from tuning.experiment.repeats import NO_MODEL, AutoRepeats, plan_for

Run = Mapping[str, Any]


def _costs(db: Database, exp: Mapping[str, Any]) -> Costs | None:
    """The engine's cost model, or None where the DB cannot say (a lab opened read-only before
    its migrations, or an experiment imported from result files, which stores no workload to
    model): the estimate then rests on the experiment's own runs alone."""
    if not exp.get("workload"):
        return None
    try:
        return with_switches(db, exp, costs_of(db, exp))  # resident repeats cost a switch
    except sqlite3.Error:
        return None


def _restarts(exp: Mapping[str, Any]) -> bool:
    """Whether each run restarts the server (the estimate's start cost); a flag this lab cannot
    name now (learned from an engine whose flags are not cached here) is taken to restart."""
    try:
        return restarts(exp)
    except ParamError:
        return True


def _empty(exp: Mapping[str, Any], primaries: Primaries, complete: bool) -> Decision:
    values = list(exp.get("values") or [])
    return Decision(
        rule="sequential" if exp.get("repeats_auto") else "fixed-n",
        primaries=primaries,
        alpha=ALPHA,
        margin=MARGIN,
        param=exp.get("param"),
        baseline=format_value(values[0]) if values else None,
        values=(),
        reason="no measured run yet",
        complete=complete,
        experiment_id=int(exp["id"]),
    )


def decide_experiment(
    db: Database,
    exp: Mapping[str, Any],
    runs: Sequence[Run] | None = None,
    costs: Costs | None = None,
) -> Decision:
    """The experiment's decision by its own rule, from its stored runs (in run order), with what
    would decide an undecided objective."""
    primaries = Primaries.of(exp)
    exp_id = int(exp["id"])
    if runs is None:
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    complete = not is_active(exp.get("status"))
    values = list(exp.get("values") or [])
    settings = AutoRepeats.of(exp)
    if settings is not None and values:
        costs = costs or _costs(db, exp)
        plan = plan_for(values, runs, settings, costs, _restarts(exp), primaries)
        labels = [format_value(v) for v in values]
        decision = decide_sequential(
            plan,
            primaries,
            labels[1:],
            param=exp.get("param"),
            baseline=labels[0],
            experiment_id=exp_id,
            complete=complete and plan.stop,
        )
    elif runs:
        comparison = build_comparison(runs, default_baseline(runs))
        decision = decide_fixed(comparison, primaries, experiment_id=exp_id, complete=complete)
        if exp.get("status") == Status.CANCELLED:
            decision = _said(decision, "fixed repeats, stopped before every run was in: one look")
    else:
        return _empty(exp, primaries, complete)
    decision = with_next_step(decision, experiment_next_step(db, exp, decision, runs, costs))
    return with_notes(decision, exp)


def with_notes(decision: Decision, exp: Mapping[str, Any]) -> Decision:
    """The record with the notes its experiment calls for (a fall back from resident engines, or
    a resident check that differs: its runs were served both ways), each once."""
    from dataclasses import replace

    note = resident_note(exp.get("resident"))
    if note is None or note in decision.notes:
        return decision
    return replace(decision, notes=(*decision.notes, note))


def _said(decision: Decision, reason: str) -> Decision:
    from dataclasses import replace

    return replace(decision, reason=reason)


def experiment_next_step(
    db: Database,
    exp: Mapping[str, Any],
    decision: Decision,
    runs: Sequence[Run],
    costs: Costs | None = None,
) -> NextStep | None:
    """More runs a side that would likely decide every undecided objective, their time, and the
    limits to resume with; None when no objective is undecided."""
    undecided = decision.undecided
    if not undecided:
        return None
    estimates = [v.more.runs if v.more else None for v in undecided]
    if any(k is None for k in estimates):
        return NextStep(None)
    more = max(int(k or 0) for k in estimates) or 1
    done = max((m.change.n_cand for v in undecided for m in v.metrics), default=0)
    base = max((m.change.n_base for v in undecided for m in v.metrics), default=0)
    target = max(done, base) + more
    settings = AutoRepeats.of(exp)
    max_repeats = max(target, settings.max_repeats if settings else 0)
    costs = costs or _costs(db, exp)
    model = blend(costs or NO_MODEL, [r for r in runs if r.get("status") == Status.DONE])
    known = costs is not None or model.measured_runs > 0
    sides = 1 + len(undecided)
    seconds = runs_seconds(model, more * sides, _restarts(exp), values=sides) if known else None
    budget = None
    if settings is not None and settings.budget_minutes is not None:
        spent = sum(s for r in runs if (s := span_s(r.get("started_at"), r.get("finished_at"))))
        more_s = seconds if seconds is not None else settings.budget_minutes * 60.0
        budget = max(settings.budget_minutes, math.ceil((spent + more_s) / 60.0))
    words = about(seconds) if seconds is not None else None
    return NextStep(more, seconds, words, max_repeats, budget)


def store_decision(db: Database, experiment_id: int) -> Decision | None:
    """Decide the experiment by its rule and store the record on it (its runner calls this as it
    ends); None for an experiment of fewer than two values (nothing to decide between)."""
    exp = queries.get_experiment(db, experiment_id)
    if len(exp.get("values") or []) < 2:
        return None
    decision = decide_experiment(db, exp)
    repo.update_experiment(db, experiment_id, decision_json=decision.to_json())
    return decision


def decision_of(
    db: Database, exp: Mapping[str, Any], runs: Sequence[Run] | None = None
) -> Decision:
    """The experiment's record as stored; for one still running, or stored before the record
    existed (or unreadable), the record its own rule gives for the runs so far. An imported
    experiment's record is made again from its runs by the same rule: a bundle's runs are its
    evidence, its stored words are not."""
    stored = exp.get("decision")
    local = (exp.get("origin") or "local") == "local"
    if isinstance(stored, Mapping) and local and not is_active(exp.get("status")):
        try:
            return with_notes(Decision.from_json(stored), exp)
        except ValueError:
            pass
    ordered = None if runs is None else sorted(runs, key=lambda r: (r.get("seq") or 0, r["id"]))
    return decide_experiment(db, exp, ordered)


def latest_decision(db: Database) -> tuple[dict[str, Any], Decision] | None:
    """The newest experiment of two or more values that ran, with its decision (Home shows it)."""
    for exp in queries.list_experiments(db):
        if len(exp.get("values") or []) >= 2 and queries.experiment_run_ids(db, int(exp["id"])):
            return exp, decision_of(db, exp)
    return None
