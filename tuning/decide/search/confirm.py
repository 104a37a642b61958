"""Confirming a search's choice (issue 23 item 5): one value a run is no decision, so the chosen
value runs against the search's baseline value (or, when that is the chosen value itself or
unknown, against its closest rival) as an ordinary experiment with `--repeats auto`: interleaved,
counterbalanced rounds until the stopping rule (tuning.compare.sequential) decides it or its
budget of repeats is spent. The experiment is named after the search (`confirm search ID: ...`),
so the search finds it again; its verdict on the search's objective is read from the stored runs
by the compare package's rule, the interval beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from store import connect, queries
from tuning.compare.selection import SelectionError, select_runs
from tuning.decide.search.driver import SearchSpec
from tuning.engine.params import format_value, get_param
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.experiment.spec import ExperimentSpec


def confirm_prefix(search_id: int) -> str:
    """The name every confirming experiment of this search starts with."""
    return f"confirm search {search_id}:"


AGAINST = ("baseline", "rival")


def confirm_values(facts: Mapping[str, Any], against: str = "baseline") -> list[Any] | None:
    """[other, chosen] for the confirming experiment: against the search's baseline value (else,
    when that is unknown or the chosen value itself, the closest rival), or against the closest
    rival (the interval on the choice); None without both."""
    chosen, base, rival = facts["chosen"], facts["baseline"], facts["rival"]
    other = base if against == "baseline" and base is not None and base != chosen else rival
    return None if chosen is None or other is None else [other, chosen]


def confirm_plan(
    facts: Mapping[str, Any], spec: SearchSpec, against: str = "baseline", **who: str
) -> dict[str, Any]:
    """plan_experiment's keywords for the confirming experiment: the other value first (the side
    every verdict is against), the chosen value second, repeated until decided; the search's
    workload, engine and baseline config. ValueError when there is no pair."""
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
        auto=AutoRepeats(),
        name=f"{confirm_prefix(int(facts['search_id']))} {name} "
        f"{format_value(values[1])} vs {format_value(values[0])}",
        **who,
    )


def plan_confirm(
    db_path: Path, facts: Mapping[str, Any], spec: SearchSpec, against: str = "baseline", **who: str
) -> int:
    """Write the confirming experiment (queued; a runner takes it); its id."""
    return plan_experiment(
        db_path, ExperimentSpec.build(**confirm_plan(facts, spec, against, **who))
    )


def confirm_verdict(db_path: Path, search_id: int, spec: SearchSpec) -> dict[str, Any] | None:
    """The latest confirming experiment of the search and its verdict on the objective (chosen
    vs the other value, with the verdicts' interval as a % change); None when there is none."""
    with connect(db_path, readonly=True) as db:
        ids = queries.search_experiment_ids(db, confirm_prefix(search_id))
        if not ids:
            return None
        exp = queries.get_experiment(db, ids[-1])
        out: dict[str, Any] = {
            "experiment_id": ids[-1],
            "status": exp["status"],
            "other": exp["values"][0],
            "chosen": exp["values"][-1],
            "verdict": "not run yet",
            "change_pct": None,
            "interval_pct": None,
            "runs_a_side": None,
            "reason": (exp.get("repeats_plan") or {}).get("reason") or exp["status"],
        }
        try:
            comparison = select_runs(db, experiment_ids=ids[-1:], slo=spec.slo_ms).comparison
        except SelectionError:
            return out
    if not comparison.candidates:
        return out
    change = comparison.changes.get((comparison.candidates[-1].label, spec.metric))
    if change is None:
        return out

    def pct(x: float | None) -> float | None:
        return None if x is None else x * 100

    out.update(
        verdict=change.verdict,
        change_pct=pct(change.rel_change),
        interval_pct=None
        if change.rel_low is None
        else [pct(change.rel_low), pct(change.rel_high)],
        runs_a_side=[change.n_base, change.n_cand],
    )
    return out
