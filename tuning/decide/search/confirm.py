"""Confirming a search's choice (issue 23 item 5, issue 37 item 4): the search's choice (or, when
it is undecided or a tie, its leader) runs against its closest rival (the interval on the
choice) or the search's baseline value (the gain over it) as an ordinary experiment with
`--repeats auto`: interleaved, counterbalanced rounds until the stopping rule
(tuning.compare.sequential) decides it or its budget of repeats is spent. The experiment is named
after the search (`confirm search ID: ...`), so the search finds it again.

Its verdict on the search's objective is the stopping rule's own, as the experiment stored it
(`repeats_plan_json`: the verdict at the look that decided, else at the last look), never a
fresh 95 % comparison of all its runs; the interval beside it is that look's (its runs a side,
its confidence). An objective the rule did not watch (it watches output throughput, mean TTFT
and mean TPOT) is judged by the same rule replayed on the stored runs. Each side's SLOs are
judged on the interval over its runs (tuning.decide.search.slo), never run by run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.status import Status
from store import connect, queries
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import request_loader, run_metric_values
from tuning.compare.decision import Decision
from tuning.compare.sequential import plan_next
from tuning.compare.stats import bootstrap_change
from tuning.decide.search.driver import SearchSpec
from tuning.decide.search.slo import slo_key, slo_state
from tuning.engine.params import format_value, get_param
from tuning.experiment.decision import decision_of
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES
from tuning.experiment.spec import ExperimentSpec


def confirm_prefix(search_id: int) -> str:
    """The name every confirming experiment of this search starts with."""
    return f"confirm search {search_id}:"


AGAINST = ("baseline", "rival")


def confirm_values(facts: Mapping[str, Any], against: str = "baseline") -> list[Any] | None:
    """[other, chosen] for the confirming experiment: the search's choice (else its leader)
    against the search's baseline value (else, when that is unknown or the same value, the
    closest rival), or against the closest rival; None without both."""
    chosen = facts.get("chosen")
    if chosen is None:
        chosen = facts.get("leader")
    base, rival = facts.get("baseline"), facts.get("rival")
    other = base if against == "baseline" and base is not None and base != chosen else rival
    return None if chosen is None or other is None or other == chosen else [other, chosen]


def confirm_plan(
    facts: Mapping[str, Any],
    spec: SearchSpec,
    against: str = "baseline",
    auto: AutoRepeats | None = None,
    **who: str,
) -> dict[str, Any]:
    """plan_experiment's keywords for the confirming experiment: the other value first (the side
    every verdict is against), the chosen value second, repeated until decided within `auto`'s
    limits (default: the experiment's own, DEFAULT_MAX_REPEATS runs a value and
    DEFAULT_BUDGET_MINUTES); the search's workload, engine and baseline config. ValueError when
    there is no pair."""
    values = confirm_values(facts, against)
    if values is None:
        raise ValueError(f"search {facts['search_id']}: no chosen value and rival to confirm")
    name = get_param(spec.param).name
    return dict(
        param=name,
        values=values,
        workload=spec.workload,
        engine=spec.engine,
        base_config={k: v for k, v in spec.base_config.items() if k != name},
        base_url=spec.base_url,
        model=spec.model,
        auto=auto or AutoRepeats(budget_minutes=DEFAULT_BUDGET_MINUTES),
        name=f"{confirm_prefix(int(facts['search_id']))} {name} "
        f"{format_value(values[1])} vs {format_value(values[0])}",
        **who,
    )


def plan_confirm(
    db_path: Path,
    facts: Mapping[str, Any],
    spec: SearchSpec,
    against: str = "baseline",
    auto: AutoRepeats | None = None,
    **who: str,
) -> int:
    """Write the confirming experiment (queued; a runner takes it); its id."""
    return plan_experiment(
        db_path, ExperimentSpec.build(**confirm_plan(facts, spec, against, auto, **who))
    )


def confirm_verdict(db_path: Path, search_id: int, spec: SearchSpec) -> dict[str, Any] | None:
    """The latest confirming experiment of the search and its verdict on the objective (chosen
    vs the other value: the stopping rule's verdict, with that look's interval as a % change),
    each side's SLO state; None when there is none."""
    with connect(db_path, readonly=True) as db:
        ids = queries.search_experiment_ids(db, confirm_prefix(search_id))
        if not ids:
            return None
        exp = queries.get_experiment(db, ids[-1])
        loader = request_loader(db)
        runs = [
            (r, run_metric_values(r, spec.slo_ms, loader))
            for r in queries.list_runs(db, ids[-1], True)
            if r["status"] == Status.DONE
        ]
        # the record the confirm's runner stored when it ended; none yet: the rule replayed below
        record = decision_of(db, exp) if isinstance(exp.get("decision"), Mapping) else None
    other, chosen = exp["values"][0], exp["values"][-1]
    out: dict[str, Any] = {
        "experiment_id": ids[-1],
        "status": exp["status"],
        "other": other,
        "chosen": chosen,
        "verdict": "not run yet",
        "change_pct": None,
        "interval_pct": None,
        "confidence": None,
        "runs_a_side": None,
        "reason": (exp.get("repeats_plan") or {}).get("reason") or exp["status"],
        "slo": None,
    }
    sides = {
        label: [(r, v) for r, v in runs if r.get("value") == label]
        for label in (format_value(other), format_value(chosen))
    }
    base, cand = list(sides.values())
    if spec.slo_ms:
        out["slo"] = {
            side: slo_state(
                {
                    n: [float(r[slo_key(n)]) for r, _ in rows if r.get(slo_key(n)) is not None]
                    for n in spec.slo_ms
                },
                spec.slo_ms,
            ).to_json()
            for side, rows in (("other", base), ("chosen", cand))
        }
    found = rule_verdict(exp, spec.metric, [v for _, v in base], [v for _, v in cand])
    if found is not None:
        out.update(found)
        if record is not None:
            out.update(recorded_verdict(record, format_value(chosen), spec.metric))
    return out


def recorded_verdict(record: Decision, label: str, metric: str) -> dict[str, Any]:
    """The confirm's verdict on `metric` as its decision record holds it (the level it was judged
    at, Holm's share over the primaries included), so `search show` says what `compare` says of
    the same experiment; empty when the record does not judge that metric."""
    value = next((v for v in record.values if v.value == label), None)
    judged = value.metric(metric) if value is not None else None
    if judged is None:
        return {}
    c = judged.change
    return {
        "verdict": c.verdict,
        "change_pct": None if c.rel_change is None else c.rel_change * 100,
        "interval_pct": None
        if c.rel_low is None or c.rel_high is None
        else [c.rel_low * 100, c.rel_high * 100],
        "confidence": c.confidence,
        "runs_a_side": [c.n_base, c.n_cand],
    }


def rule_verdict(
    exp: Mapping[str, Any],
    metric: str,
    base: Sequence[Mapping[str, Any]],
    cand: Sequence[Mapping[str, Any]],
) -> dict[str, Any] | None:
    """The stopping rule's verdict on `metric` (chosen = the last value vs the first) and the
    interval of the look it was made at; None before two runs a side."""
    settings = AutoRepeats.of(exp) or AutoRepeats()
    design = settings.design()
    better = METRIC_BY_KEY[metric].better
    b = [float(r[metric]) for r in base if r.get(metric) is not None]
    c = [float(r[metric]) for r in cand if r.get(metric) is not None]
    if min(len(b), len(c)) < design.min_repeats:
        return None
    label = format_value(exp["values"][-1])
    stored = ((exp.get("repeats_plan") or {}).get("values") or {}).get(label) or {}
    verdict = (stored.get("verdicts") or {}).get(metric)
    n = (stored.get("decided_at") or {}).get(metric)
    if verdict is None:  # a metric the rule did not watch: the same rule, replayed
        plan = plan_next(
            [{metric: x} for x in b], {label: [{metric: x} for x in c]}, {metric: better}, design
        )
        status = plan.values[label]
        verdict, n = status.verdicts.get(metric), status.decided_at.get(metric)
    reached = min(len(b), len(c))
    if n is None:  # undecided: at its last look (the unscheduled last one when the budget or
        # max_repeats stopped it between two scheduled looks), else the last scheduled one
        looks = [k for k in design.looks() if k <= reached]
        final = stored.get("state") in ("budget", "capped") or not looks
        n = reached if final else looks[-1]
    n = min(int(n), reached)
    confidence = design.look_confidence() if n in design.looks() else design.final_confidence(n)
    change = bootstrap_change(b[:n], c[:n], better, confidence=confidence)
    return {
        "verdict": verdict or change.verdict,
        "change_pct": None if change.rel_change is None else change.rel_change * 100,
        "interval_pct": None
        if change.rel_low is None or change.rel_high is None
        else [change.rel_low * 100, change.rel_high * 100],
        "confidence": confidence,
        "runs_a_side": [n, n],
        "runs_total": [len(b), len(c)],
    }
