"""A search as a result of its own (issue 23 item 5, issue 37 item 4): its facts (JSON-ready) and
the same facts in words, for `tuning-lab search show ID` and the Searches page: the choice
(its decision, settled by the confirm once that has a verdict: tuning.decide.search.choice), the
choice's interval against the closest rival or the tie and its tie-breaker, each value's runs and
SLO state, the knee, why each step ran, and the experiment that confirms the choice.

Everything is read from the store: the search's row with its stored decision, its steps' runs
(tuning.decide.search.record) and the confirming experiment's stored verdict
(tuning.decide.search.confirm).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from store import connect, queries
from tuning.compare.catalog import METRIC_BY_KEY, WORKLOAD_PARAMS, metric_label
from tuning.compare.frontier import knee_keys, side_knee
from tuning.compare.present import fmt, pct_number
from tuning.compare.selection import select_runs
from tuning.decide.search.choice import choice
from tuning.decide.search.confirm import confirm_values, confirm_verdict
from tuning.decide.search.driver import NAME_PREFIX, SearchSpec
from tuning.decide.search.record import Progress, progress
from tuning.decide.search.words import choice_line, failed_words, value_lines
from tuning.engine.params import format_value, get_param


def typed(value: float | None, spec: SearchSpec) -> Any:
    """A value of the search's space as the parameter takes it (an int for an int range)."""
    return int(value) if value is not None and spec.space.integer else value


def baseline_value(spec: SearchSpec) -> Any:
    """The parameter's value in the search's baseline: the workload's own for a workload
    parameter, the baseline config's (else the lab's default, maybe None) for a server one."""
    name = get_param(spec.param).name
    if name in WORKLOAD_PARAMS:
        return spec.workload.to_dict().get(WORKLOAD_PARAMS[name])
    if name in spec.base_config:
        return spec.base_config[name]
    return get_param(name).default


def knee_of(db_path: Path, done: Progress) -> dict[str, Any] | None:
    """The knee of the search's runs, as the search chart draws it."""
    if len(done.run_ids) < 3:
        return None
    with connect(db_path, readonly=True) as db:
        comparison = select_runs(db, run_ids=done.run_ids, slo=done.spec.slo_ms).comparison
    found = side_knee(comparison, ("output_throughput", knee_keys(done.spec.metric)[1]))
    return None if found is None else {"value": found.value, "why": found.why}


def search_facts(db_path: Path, row: Mapping[str, Any]) -> dict[str, Any]:
    """Everything `search show --json` prints and the Searches page shows, from the store."""
    done = progress(db_path, row)
    spec = done.spec
    result = row.get("result") or {}
    metric = METRIC_BY_KEY[spec.metric]
    decision = done.decision
    out: dict[str, Any] = {
        "search_id": int(row["id"]),
        "status": row["status"],
        "param": spec.param,
        "range": [typed(spec.space.lo, spec), typed(spec.space.hi, spec)],
        "objective": spec.metric,
        "better": metric.better,
        "unit": metric.unit,
        "slo_ms": dict(spec.slo_ms),
        "decision": decision,
        "leader": decision.get("leader"),
        "rival": (decision.get("rival") or {}).get("value"),
        "baseline": baseline_value(spec),
        "knee": knee_of(db_path, done),
        "stopped": result.get("stopped"),
        "start_limit": result.get("start_limit"),
        # how the budget was split (None for a search from before the race: imported)
        "budget": result.get("budget")
        or (
            {"runs": spec.budget_runs, "explore": spec.explore_runs, "used": len(done.log)}
            if done.active
            else None
        ),
        "error": row.get("error"),
        "steps": done.log,
    }
    out["confirm"] = confirm_verdict(db_path, out["search_id"], spec)
    out["choice"] = choice(decision, out["confirm"])
    chosen = out["choice"]["chosen"]
    rows: list[dict[str, Any]] = list(decision.get("values") or [])
    found: dict[str, Any] = next((r for r in rows if r["value"] == chosen), {})
    out["chosen"] = chosen
    out["chosen_objective"] = found.get("mean")
    out["interval"] = found.get("interval")
    out["chosen_runs"] = [
        int(e["run_id"])
        for e in done.log
        if chosen is not None and float(e["value"]) == float(chosen) and e["status"] == "done"
    ]
    out["choice"]["line"] = choice_line(out)
    return out


def slo_words(slo_ms: Mapping[str, float]) -> str:
    return ", ".join(f"p99 {k.upper()} <= {v:g} ms" for k, v in slo_ms.items()) or "none"


def search_lines(f: Mapping[str, Any]) -> list[str]:
    """The facts in words, one line each (the CLI prints them; the page shows the same)."""
    unit, objective = f["unit"], f["objective"]
    name = metric_label(objective)  # the words; --json keeps the key
    budget = f["budget"]
    out = [
        f"search {f['search_id']} ({f['status']}): {f['param']} over "
        f"{f['range'][0]:g}..{f['range'][1]:g}",
        f"objective: {name} ({unit}, {f['better']} is better); SLOs: {slo_words(f['slo_ms'])}",
        chosen_line(f),
    ]
    if budget:
        out.append(
            f"budget: {budget['runs']} runs, up to {budget['explore']} to explore and the rest "
            f"to race; {budget['used']} spent"
        )
    out += ["values:", *value_lines(f)]
    if f["knee"]:
        out.append(f"knee at {format_value(f['knee']['value'])}: {f['knee']['why']}")
    if f["start_limit"]:
        lim = f["start_limit"]
        out.append(f"start limit: {lim['starts']} starts, {lim['fails']} does not")
    if f["stopped"]:
        out.append(f"stopped: {f['stopped']}")
    for e in f["steps"]:
        measured = fmt(e.get(objective), unit)
        under = e.get("under_slo")
        slo = "" if under is None else (" under the SLOs" if under else " over the SLOs")
        out.append(
            f"  step {e['step']}: {f['param']} = {format_value(e['value'])}, "
            f"run {e['run_id']} {e['status']}{failed_words(e)}, "
            f"{name} {measured}{slo} ({e['why']})"
        )
    out.append(confirm_line(f))
    return out


def chosen_line(f: Mapping[str, Any]) -> str:
    """The choice line (tuning.decide.search.words.choice_line): the decision and the confirm."""
    return str((f.get("choice") or {}).get("line") or choice_line(f))


def confirm_line(f: Mapping[str, Any]) -> str:
    """How the choice was confirmed (its verdict and interval), or how to confirm it."""
    c = f.get("confirm")
    if c:
        change = "" if c["change_pct"] is None else f" {pct_number(c['change_pct'])} %"
        if c["interval_pct"]:
            lo, hi = c["interval_pct"]
            level = f"{c['confidence'] * 100:.4g} %" if c.get("confidence") else "95 %"
            span = f"{pct_number(lo)} ... {pct_number(hi)} %"
            change += f" ({level} CI {span}, {c['runs_a_side'][0]} runs a side)"
        return (
            f"confirm: {format_value(c['chosen'])} vs {format_value(c['other'])} on "
            f"{metric_label(f['objective'])}: {c['verdict']}{change}; {c['reason']} "
            f"(experiment {c['experiment_id']}, {c['status']})"
        )
    values = confirm_values(f)
    if values is None:
        return "confirm: nothing to confirm yet"
    return (
        f"confirm: run {format_value(values[1])} vs {format_value(values[0])} with repeats until "
        f"decided: tuning-lab search confirm {f['search_id']} (or the Searches page)"
    )


def find_search(db_path: Path, search_id: int) -> dict[str, Any]:
    """The search's row (StoreError: no such search)."""
    with connect(db_path, readonly=True) as db:
        return queries.get_search(db, search_id)


def unrecorded_keys(db_path: Path) -> list[str]:
    """Keys of search steps in the store without a search row (a lab from before searches were
    recorded): `search import` records one from its --json output."""
    with connect(db_path, readonly=True) as db:
        known = {str(r["key"]) for r in queries.list_searches(db)}
        names = [str(e["name"] or "") for e in queries.list_experiments(db, True)]
    keys = {n[len(NAME_PREFIX) :].split(":", 1)[0] for n in names if n.startswith(NAME_PREFIX)}
    return sorted(k for k in keys if k and k not in known)
