"""New experiment's "Search one parameter" mode: the search form (parameter, range, objective,
SLOs, budget of runs, workload), started as its own process (tuning.decide.background), and
its progress, decision log and chosen value with its interval, read from the store.

No job state in st.session_state: what runs and how far it got is the `searches` row and its
steps' runs. Widget keys start with `srch_`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from store import connect, queries
from tuning.compare.catalog import METRIC_BY_KEY, METRICS
from tuning.compare.present import fmt
from tuning.decide.background import SearchBusy, busy_reason, spawn_search, stop_search
from tuning.decide.search.driver import OBJECTIVES, STARTUP, SearchSpec
from tuning.decide.search.race import budget_text
from tuning.decide.search.record import Progress, objective_label, progress
from tuning.decide.search.strategy import Space
from tuning.decide.search.words import decision_line
from tuning.engine.params import PARAMS, Param, ParamError, format_value
from tuning.engine.spec import EngineSpec
from tuning.engine.validate import parse_assignments
from tuning.measure.traffic.workload import Workload
from tuning.settings import Settings
from ui.common import md_code, md_escape
from ui.links import compare_link
from ui.words import failure_words, metric_words

POLL_S = 2.0
SLO_NAMES = ("ttft", "tpot", "e2el")
# What a search can optimise: goodput (with SLOs), every latency, and startup time (a server
# parameter only: SearchSpec.validate says why otherwise).
OBJECTIVE_KEYS = [
    "output_throughput",
    *OBJECTIVES,
    *(m.key for m in METRICS if m.unit == "ms"),
    STARTUP,
]


def searchable(spec: EngineSpec) -> list[str]:
    """Numeric parameters this engine takes: the ones a range can be searched over."""
    return [
        n for n, p in PARAMS.items() if p.type in ("int", "float") and spec.backend in p.backends
    ]


def default_range(param: Param) -> tuple[float, float]:
    lo = param.minimum if param.minimum is not None else 1.0
    if param.type == "int":
        lo = max(lo, 1.0)
        return lo, min(param.maximum or lo * 32, lo * 32)
    return lo, param.maximum if param.maximum is not None else lo * 4


def _objective_text(key: str) -> str:
    """'output throughput (tok/s, higher is better)': the metric's words, as the values mode
    and the search's caption say it (the key is the CLI's --objective, not the page's)."""
    metric = METRIC_BY_KEY[OBJECTIVES.get(key, key)]
    return f"{metric.label} ({metric.unit}, {metric.better} is better)"


def search_form(spec: EngineSpec) -> SearchSpec | None:
    """The form; the spec it describes, or None (with the reasons shown) when it is not valid."""
    names = searchable(spec)
    name = st.selectbox(
        "Parameter to search",
        names,
        index=names.index("max-num-seqs") if "max-num-seqs" in names else 0,
        key="srch_param",
        format_func=lambda n: f"{n} ({PARAMS[n].kind})",
    )
    param = PARAMS[name]
    st.caption(f"{md_escape(param.help)} Allowed: {md_escape(param.describe_range())}")
    lo_default, hi_default = default_range(param)
    step = 1.0 if param.type == "int" else 0.01
    c1, c2, c3, c4 = st.columns(4)
    lo = c1.number_input("From", value=float(lo_default), step=step, key=f"srch_lo_{name}")
    hi = c2.number_input("To", value=float(hi_default), step=step, key=f"srch_hi_{name}")
    budget = c3.number_input("Budget of runs", 2, 50, 8, key="srch_budget")
    coarse = c4.number_input("Coarse pass points", 2, 10, 4, key="srch_coarse")
    objective = st.selectbox(
        "Objective", OBJECTIVE_KEYS, key="srch_objective", format_func=_objective_text
    )
    st.markdown(
        "**SLOs** (0 = off): a value meets one when the interval of its p99 over its repeats "
        "lies under the limit; one run over it rules nothing out"
    )
    slo: dict[str, float] = {}
    for col, slo_name in zip(st.columns(3), SLO_NAMES, strict=True):
        limit = col.number_input(
            f"p99 {slo_name.upper()} ≤ ms", 0.0, value=0.0, step=10.0, key=f"srch_slo_{slo_name}"
        )
        if limit > 0:
            slo[slo_name] = float(limit)
    st.markdown("**Workload** (the same for every step)")
    w1, w2, w3, w4 = st.columns(4)
    workload = Workload(
        num_requests=int(w1.number_input("Requests", 1, 100000, 64, key="srch_requests")),
        concurrency=int(w2.number_input("Concurrency", 1, 10000, 16, key="srch_concurrency")),
        input_len=int(w3.number_input("Input tokens", 1, 100000, 64, key="srch_input")),
        output_len=int(w4.number_input("Output tokens", 1, 100000, 64, key="srch_output")),
    )
    with st.expander("Baseline configuration", expanded=False):
        lines = "\n".join(f"{k}={format_value(v)}" for k, v in spec.baseline.items())
        text = st.text_area("NAME=VALUE, one per line", lines, key="srch_baseline", height=100)
    baseline, errors = parse_assignments(text.splitlines(), "baseline line")
    try:
        space = Space(float(lo), float(hi), param.type == "int")
        search = replace(
            SearchSpec(name, space, objective, workload, spec, baseline, slo),
            budget_runs=int(budget),
            coarse=int(coarse),
        )
        search.validate()
    except (ParamError, ValueError) as exc:
        errors.append(str(exc))
    for err in errors:
        st.error(md_escape(err))
    if not errors:
        st.caption(md_escape(budget_text(search.budget_runs, search.coarse_points)))
    return None if errors else search


def render_search_mode(
    path: Path, spec: EngineSpec, settings: Settings, engine_broken: bool = False
) -> None:
    """The form, the Start button (one thing at a time per machine; off while the engine cannot
    start, which the page has said) and the latest search; the page has reaped what died
    (tuning.decide.reaper.reap_dead) before it asks who holds it."""
    search = search_form(spec)
    reason = busy_reason(path)
    if reason:
        st.warning(f"{md_escape(reason)}. Watch it below or on **Live**.")
    reason = reason or ("the engine cannot start" if engine_broken else "")
    if st.button(
        "Start search",
        type="primary",
        disabled=bool(reason) or search is None,
        key="srch_start",
    ):
        try:
            assert search is not None
            sid = spawn_search(
                path, search, author=settings.resolved_author(), host=settings.resolved_host()
            )
        except (SearchBusy, ParamError, ValueError) as exc:
            st.error(f"refused: {md_escape(exc)}")
        else:
            st.success(f"Search {sid} started in its own process; closing this tab stops nothing.")
    with connect(path, readonly=True) as db:
        rows = queries.list_searches(db)
    if rows:
        latest = rows[0]
        active = latest["status"] in ("queued", "running")
        st.fragment(_status_panel, run_every=POLL_S if active else None)(path, int(latest["id"]))


def _status_panel(path: Path, search_id: int) -> None:
    with connect(path, readonly=True) as db:
        row = queries.get_search(db, search_id)
    render_search_progress(path, progress(path, row))


def render_search_progress(path: Path, done: Progress) -> None:
    """Status, progress, the decision log, and the chosen value with its interval."""
    row, spec = done.row, done.spec
    with st.container(border=True, key="srch_status"):
        st.subheader(
            f"Search {row['id']}: {md_escape(spec.param)} over "
            f"{spec.space.lo:g}..{spec.space.hi:g} · {md_escape(row['status'])}"
        )
        st.caption(f"objective: {md_escape(objective_label(spec))}" + _slo_text(spec))
        steps = len(done.log)
        st.progress(
            min(steps / max(spec.budget_runs, 1), 1.0),
            text=f"steps run {steps} of at most {spec.budget_runs}",
        )
        if done.active:
            if st.button("Stop search", key="srch_stop", icon=":material/stop:"):
                stop_search(path, int(row["id"]))
                st.info("Stopping: the current step's server is stopped, then the search ends.")
        elif row.get("error"):
            st.warning(md_escape(row["error"]))
        st.markdown(chosen_text(done))
        if done.log:
            st.dataframe(log_frame(done), hide_index=True, key="srch_log")
            compare_link("Compare the search's runs", runs=done.run_ids, search=row["id"])
        if row.get("log_path"):
            st.caption(f"process output: {md_code(row['log_path'])}")


def _slo_text(spec: SearchSpec) -> str:
    if not spec.slo_ms:
        return ""
    return " · SLOs: " + ", ".join(f"p99 {k.upper()} ≤ {v:g} ms" for k, v in spec.slo_ms.items())


def chosen_text(done: Progress) -> str:
    """The search's decision so far in words (tuning.decide.search.words: the choice with its
    interval against the closest rival, a named tie, or what keeps it undecided); never a choice
    from one run."""
    if not done.log:
        return "**Decision:** none yet (no step has run)"
    metric = METRIC_BY_KEY[done.spec.metric]
    shown = {
        "decision": done.decision,
        "objective": done.spec.metric,
        "unit": metric.unit,
        "param": done.spec.param,
    }
    so_far = " so far" if done.active else ""
    return f"**Decision{so_far}:** {md_escape(decision_line(shown))}"


def log_frame(done: Progress) -> pd.DataFrame:
    """The decision log: each step's value, why it was chosen, its run and what it measured."""
    metric = done.spec.metric
    unit = METRIC_BY_KEY[metric].unit
    rows: list[dict[str, Any]] = [
        {
            "step": e["step"],
            "value": e["value"],
            "why": e["why"],
            "run": e["run_id"],
            "status": e["status"]
            + (f" ({failure_words(e['failure_kind'])})" if e.get("failure_kind") else ""),
            f"{metric_words(metric)} ({unit})": fmt(e.get(metric), unit),
            "this run under the SLOs": e.get("under_slo"),
            "value's SLOs (interval)": e.get("slo_state"),
        }
        for e in done.log
    ]
    return pd.DataFrame(rows)
