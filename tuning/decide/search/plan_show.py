"""A tuning plan as a result of its own (issue 23 item 5, "a plan likewise"): its facts
(JSON-ready) and the same facts in words, for `tuning-lab plan show ID` and the Searches
page's Plans section: the parameters in order, each search's chosen value with its objective and
SLOs (and the search's id), the recommended configuration against the start, the gain with its
interval and verdict, the `vllm serve` command, and the run and experiment ids behind each number.

Everything is read from the plan's row (tuning.decide.search.plan_record): run_plan's
recommendation,
stored as each search ends and when the plan ends. The recommended configuration and its `vllm
serve` command are shown only when the plan's decision record (`decision`: the fixed-n test, Holm
over the objective and guards) decided the objective better and no guard worse; otherwise the
facts say why, and what would decide it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from store import connect
from store.queries import get_plan, list_plans
from tuning.compare.catalog import METRIC_BY_KEY, metric_label
from tuning.compare.decision import Decision
from tuning.compare.present import Tone, fmt
from tuning.decide.search.plan import verdict_text_of
from tuning.decide.search.plan_record import reap_plans
from tuning.decide.search.show import slo_words
from tuning.decide.search.words import search_choice_text
from tuning.engine.params import show_value


def find_plan(db_path: Path, plan_id: int) -> dict[str, Any]:
    """The plan's row (StoreError: no such plan)."""
    with connect(db_path, readonly=True) as db:
        return get_plan(db, plan_id)


def plan_rows(db_path: Path) -> list[dict[str, Any]]:
    """Every plan, newest first, a plan whose process died marked failed first."""
    if not db_path.exists():
        return []
    reap_plans(db_path)
    with connect(db_path, readonly=True) as db:
        return list_plans(db)


def label(row: Mapping[str, Any]) -> str:
    """'plan 2: max-num-seqs, block-size · done · gain +12.0 % ▲ better' (a list's line)."""
    params = ", ".join((row.get("spec") or {}).get("params") or [])
    gain = (row.get("result") or {}).get("gain")
    tail = f" · gain {verdict_text_of(gain).split(' (')[0]}" if gain else ""
    return f"plan {row['id']}: {params} · {row['status']}{tail}"


def gain_tone(gain: Mapping[str, Any]) -> Tone:
    """Green / red only for a decided better / worse gain; anything else the neutral grey (the
    verdict is already in the objective's direction: better is better)."""
    verdict = str(gain.get("verdict"))
    return "better" if verdict == "better" else "worse" if verdict == "worse" else "muted"


def _step(index: int, param: str, found: Mapping[str, Any] | None) -> dict[str, Any]:
    if found is None:
        return {"index": index, "param": param, "status": "not run yet", "chosen": None}
    chosen = found.get("chosen")
    entry: Mapping[str, Any] = next(
        (e for e in found.get("log") or [] if chosen is not None and e["value"] == chosen), {}
    )
    return {
        "index": index,
        "param": param,
        "status": "done",
        "search_id": found.get("search_id"),
        "range": found.get("range"),
        "chosen": chosen,
        "objective": found.get("objective"),
        "chosen_objective": found.get("chosen_objective"),
        "meets_slo": entry.get("meets_slo"),
        "chosen_run": entry.get("run_id"),
        "slo_ms": found.get("slo_ms") or {},
        "baseline": found.get("baseline") or {},
        "runs": list(found.get("runs") or []),
        "experiment_ids": list(found.get("experiment_ids") or []),
        "stopped": found.get("stopped"),
    }


def verdict_of(result: Mapping[str, Any]) -> tuple[bool, str]:
    """(recommended, why not): from the plan's stored decision record."""
    stored = result.get("decision")
    if not isinstance(stored, Mapping):
        if not result.get("gain"):
            return False, "not measured yet"
        return False, (
            "no decision record: this plan ended before the lab recorded decisions, so its gain "
            "is for information only; run the same plan again to decide"
        )
    try:
        decision = Decision.from_json(stored)
    except ValueError:
        return False, "its decision record cannot be read"
    if decision.recommended is not None:
        return True, ""
    value = decision.values[0] if decision.values else None
    objective = METRIC_BY_KEY[decision.primaries.objective].label
    if value is None:
        return False, f"no decision: {decision.reason}"
    if value.outcome == "trade-off":
        worse = ", ".join(METRIC_BY_KEY[k].label for k in value.guards_worse)
        return False, f"{objective} is better but {worse} worse: a trade-off"
    if value.outcome == "not better":
        return False, f"{objective} is decided not better than the start: keep the start"
    more = value.more
    runs = f"≈ {more.runs} more runs a side" if more and more.runs else "more runs a side"
    return False, (
        f"{objective} is undecided; {runs} (a larger --confirm-repeats) would likely decide it"
    )


def _config(start: Mapping[str, Any], final: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "param": k,
            "start": start.get(k),
            "recommended": final.get(k),
            "changed": start.get(k) != final.get(k),
        }
        for k in sorted(set(start) | set(final))
    ]


def plan_facts(row: Mapping[str, Any]) -> dict[str, Any]:
    """Everything `plan show --json` prints and the Searches page shows of a plan."""
    spec, result = row.get("spec") or {}, row.get("result") or {}
    params = list(result.get("params") or spec.get("params") or [])
    by_param = {s["param"]: s for s in result.get("searches") or []}
    objective = str(result.get("objective") or spec.get("objective") or "")
    metric = METRIC_BY_KEY.get(objective)
    gains = [{**g, "tone": gain_tone(g)} for g in result.get("gains") or []]
    evidence = result.get("evidence") or {}
    recommended, why_not = verdict_of(result)
    return {
        "plan_id": int(row["id"]),
        "key": row.get("key"),
        "status": row.get("status"),
        "error": row.get("error"),
        "started_at": row.get("started_at"),
        "finished_at": row.get("finished_at"),
        "params": params,
        "objective": objective,
        "unit": metric.unit if metric else "",
        "better": metric.better if metric else "",
        "slo_ms": dict(result.get("slo_ms") or spec.get("slo_ms") or {}),
        "steps": [_step(i, p, by_param.get(p)) for i, p in enumerate(params, 1)],
        "config": _config(result.get("start") or {}, result.get("recommended") or {}),
        "gain": gains[0] if gains else None,
        "gains": gains,
        "recommended": recommended,
        "not_recommended": why_not or None,
        "decision": result.get("decision"),
        # only a decided recommendation comes with a command to run it
        "serve_command": result.get("serve_command") if recommended else None,
        "start_command": result.get("start_command"),
        "confirm_runs": evidence.get("confirm_runs") or {},
        "confirm_experiments": list(evidence.get("confirm_experiments") or []),
    }


def _ids(what: str, ids: Sequence[Any]) -> str:
    return f"{what} {', '.join(str(i) for i in ids)}" if ids else f"no {what}"


def step_line(f: Mapping[str, Any], s: Mapping[str, Any]) -> str:
    """'1. max-num-seqs 1..64: chosen 16, output throughput 1,234 tok/s, meets the SLOs (search 4;
    run 7 of runs 5, 6, 7; experiments 5, 6, 7)'."""
    head = f"{s['index']}. {s['param']}"
    if s["status"] != "done":
        return f"{head}: {s['status']}"
    lo, hi = s["range"] or (None, None)
    param = s["param"]
    head += "" if lo is None else f" {show_value(param, lo)}..{show_value(param, hi)}"
    if s.get("decision"):  # the search's own decision, in the words of its summary and report
        text = f"{head}: {search_choice_text(s)}"
    elif s["chosen"] is None:
        text = f"{head}: no usable value"
    else:
        measured = fmt(s["chosen_objective"], f["unit"])
        chosen = show_value(s["param"], s["chosen"])
        text = f"{head}: chosen {chosen}, {metric_label(s['objective'])} {measured}"
        if s["slo_ms"]:
            text += ", meets the SLOs" if s["meets_slo"] else ", breaks the SLOs"
    where = [f"search {s['search_id']}"] if s.get("search_id") else []
    if s.get("chosen_run"):
        where.append(f"run {s['chosen_run']}")
    where += [_ids("runs", s["runs"]), _ids("experiments", s["experiment_ids"])]
    return f"{text} ({'; '.join(where)})"


def gain_line(f: Mapping[str, Any], g: Mapping[str, Any]) -> str:
    """'output throughput: 1,000 → 1,200 tok/s, +20.0 %: ▲ better (95 % CI …)'."""
    values = f"{fmt(g['start_mean'], g['unit'])} → {fmt(g['recommended_mean'], g['unit'])}"
    return f"{g['label']}: {values}, {verdict_text_of(g)}"


def plan_lines(f: Mapping[str, Any]) -> list[str]:
    """The facts in words, one line each (the CLI prints them; the page shows the same)."""
    out = [
        f"plan {f['plan_id']} ({f['status']}): {', then '.join(f['params']) or 'no parameter'}",
        f"objective: {metric_label(f['objective'])} ({f['unit']}, {f['better']} is better); "
        f"SLOs: {slo_words(f['slo_ms'])}",
        "searches, in order:",
        *(f"  {step_line(f, s)}" for s in f["steps"]),
    ]
    if f["config"]:
        head = "recommended" if f["recommended"] else "final (not recommended)"
        out.append(f"{head} vs start:")
        for c in f["config"]:
            start = show_value(c["param"], c["start"])  # 'unset' for None, bytes in GiB
            final = show_value(c["param"], c["recommended"])
            out.append(f"  {c['param']}: {start} → {final}{'' if c['changed'] else ' (same)'}")
    if f["gain"]:
        runs = f["confirm_runs"]
        out.append(f"gain over the start, {gain_line(f, f['gain'])}")
        out.append(
            f"  behind it: {_ids('runs', runs.get('start') or [])} (start) vs "
            f"{_ids('runs', runs.get('final') or [])} (recommended); "
            f"{_ids('experiments', f['confirm_experiments'])}"
        )
        out += [f"  also {gain_line(f, g)}" for g in f["gains"][1:]]
    else:
        out.append("gain over the start: not measured yet")
    if f["serve_command"]:
        out.append(f"Recommended: serve: {f['serve_command']}")
    elif f["not_recommended"]:
        out.append(f"not recommended: {f['not_recommended']}")
    if f["start_command"]:
        out.append(f"start was: {f['start_command']}")
    if f["error"]:
        out.append(f"error: {f['error']}")
    return out
