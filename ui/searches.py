"""The Searches page (issue 23 item 5, issue 37 item 4): a search as a result of its own. The
choice first (the search's decision settled by its confirm, one line: the choice with its interval
against the closest rival, a named tie and its tie-breaker, or what keeps it undecided), each
value's runs and SLO state, then the chart (metric vs value, the chosen value, the knee and the
SLO lines), why each step ran, and one click to confirm the choice: the leader against its closest
rival (or the baseline's value) with repeats until decided, planned as an ordinary experiment and
started in its own process like New experiment's (one runner per machine).

Everything shown comes from tuning.decide.search.show (the same facts `search show ID` prints).
Widget
keys start with `srchs_`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from store import StoreError, connect, queries
from tuning.compare.present import fmt
from tuning.compare.selection import SelectionError, select_runs
from tuning.decide.background import search_running
from tuning.decide.search.confirm import confirm_values, plan_confirm
from tuning.decide.search.record import reap_searches, spec_from_json
from tuning.decide.search.show import (
    chosen_line,
    confirm_line,
    search_facts,
    slo_words,
    unrecorded_keys,
)
from tuning.decide.search.words import search_headline, slo_checks_text
from tuning.engine.current import current_spec
from tuning.engine.params import format_value
from tuning.engine.spec import EngineError
from tuning.experiment.lock import runner_busy
from tuning.experiment.supervisor import spawn_runner
from tuning.present.charts.tradeoff import KNEE_NOTE, search_chart
from tuning.settings import load_settings
from ui.common import ICONS, md_code, md_escape, pick_by_query
from ui.links import compare_link
from ui.words import failure_words, metric_words


def _label(row: Mapping[str, Any]) -> str:
    result = row.get("result") or {}
    decision = result.get("decision") or {}
    chosen = result.get("chosen")
    if decision.get("outcome") == "tie" and chosen is not None:
        tail = f" · tie, {format_value(chosen)} by its tie-breaker"
    elif chosen is not None and decision:
        tail = f" · chosen {format_value(chosen)}"
    elif decision.get("outcome") == "undecided":
        tail = " · undecided"
    else:
        tail = ""
    return f"search {row['id']}: {row['param']} · {row['status']}{tail}"


def pick_search(path: Path) -> dict[str, Any] | None:
    """The search to show: ?search=ID, else the newest; None (said why) when there is none."""
    reap_searches(path)
    with connect(path, readonly=True) as db:
        rows = queries.list_searches(db)
    missing = unrecorded_keys(path)
    if missing:
        st.info(
            f"Steps of {len(missing)} search(es) without a record (a lab from before searches "
            "were stored: " + ", ".join(map(md_code, missing)) + "). Record one from the JSON it "
            "printed: " + md_code("tuning-lab search import RESULT.json --db LAB.db")
        )
    if not rows:
        st.info(
            "No search yet. Start one on **New experiment** (Search one parameter) or with "
            + md_code("tuning-lab search --param NAME --range LO:HI")
        )
        return None
    return pick_by_query(rows, "search", "Search", "srchs_pick", _label)


def render_searches(path: Path) -> None:
    row = pick_search(path)
    if row is None:
        return
    f = search_facts(path, row)
    render_search_headline(f)
    st.dataframe(values_frame(f), hide_index=True, key="srchs_values")
    chart(path, f)
    st.subheader("Why each step ran")
    st.dataframe(search_steps_frame(f), hide_index=True, key="srchs_steps")
    compare_link(
        "Compare the search's runs", runs=[e["run_id"] for e in f["steps"]], search=f["search_id"]
    )
    confirm(path, row, f)


def render_search_headline(f: Mapping[str, Any]) -> None:
    """The decision first: the choice (or the tie, or undecided) with the confirm's result, the
    objective and the SLOs, the knee."""
    st.subheader(f"{md_escape(f['param'])}: {md_escape(search_headline(f))}")
    st.markdown(md_escape(chosen_line(f)))
    st.caption(
        md_escape(
            f"objective: {metric_words(f['objective'])} "
            f"({f['unit']}, {f['better']} is better) · SLOs: "
            f"{slo_words(f['slo_ms'])} · range {f['range'][0]:g}..{f['range'][1]:g} · "
            f"{len(f['steps'])} steps · {f['status']}"
        )
    )
    if f["knee"]:
        st.caption(md_escape(f"knee at {f['knee']['value']:g}: {f['knee']['why']}"))
    if f["stopped"]:
        st.caption(md_escape(f"stopped: {f['stopped']}"))
    if f["error"]:
        st.warning(md_escape(f["error"]))


def chart(path: Path, f: Mapping[str, Any]) -> None:
    run_ids = [int(e["run_id"]) for e in f["steps"]]
    if not run_ids:
        st.caption("No step has run yet.")
        return
    try:
        with connect(path, readonly=True) as db:
            comparison = select_runs(db, run_ids=run_ids, slo=f["slo_ms"]).comparison
    except (SelectionError, StoreError) as exc:
        st.caption(md_escape(f"no chart: {exc}"))
        return
    drawn: Any = search_chart(  # one panel a row: three side by side overflow 1024 px
        comparison, objective=f["objective"], chosen=f["chosen"], slo_ms=f["slo_ms"], columns=1
    )
    with st.container(key="srchs_chart"):
        st.altair_chart(drawn, key="srchs_chart_altair")
    st.caption(KNEE_NOTE)


def values_frame(f: Mapping[str, Any]) -> pd.DataFrame:
    """One row per value the search ran: its runs, its mean objective and interval, its SLOs
    (judged on the interval over its runs) and where it stands in the race."""
    unit = f["unit"]
    rows = []
    for r in (f.get("decision") or {}).get("values") or []:
        ci = r.get("interval")
        rows.append(
            {
                f["param"]: format_value(r["value"]),
                "runs": r["runs"],
                f"{metric_words(f['objective'])} ({unit})": fmt(r.get("mean"), unit),
                "95 % interval": "tried once: no interval yet"
                if r["runs"] == 1
                else (f"{fmt(ci[0], unit)} … {fmt(ci[1], unit)}" if ci else "—"),
                "SLOs": (r.get("slo") or {}).get("state"),
                "SLO intervals": slo_checks_text(r.get("slo")),
                "status": r["status"],
            }
        )
    return pd.DataFrame(rows)


def search_steps_frame(f: Mapping[str, Any]) -> pd.DataFrame:
    """One row per step: its value, why it ran, its run, what the objective measured, the SLOs."""
    objective, unit = f["objective"], f["unit"]
    return pd.DataFrame(
        [
            {
                "step": e["step"],
                f["param"]: format_value(e["value"]),
                "why": e["why"],
                "run": e["run_id"],
                "status": e["status"]
                + (f" ({failure_words(e['failure_kind'])})" if e.get("failure_kind") else ""),
                f"{metric_words(objective)} ({unit})": fmt(e.get(objective), unit),
                "this run under the SLOs": e.get("under_slo"),
                "chosen": f["chosen"] is not None and float(e["value"]) == float(f["chosen"]),
            }
            for e in f["steps"]
        ]
    )


def confirm(path: Path, row: Mapping[str, Any], f: Mapping[str, Any]) -> None:
    """The confirming experiment's verdict so far, and the buttons that start one."""
    st.subheader("Confirm the choice")
    st.markdown(md_escape(confirm_line(f)))
    with connect(path, readonly=True) as db:
        busy = bool(queries.active_experiments(db)) or runner_busy() or search_running(path)
    if busy:
        st.warning("An experiment or a search is running; one at a time per machine.")
    # an unsettled choice (a tie, undecided) is settled against the rival: that one leads
    settled = (f.get("choice") or {}).get("outcome") == "chosen"
    lead = "baseline" if settled else "rival"
    for against, key in (("baseline", "srchs_confirm"), ("rival", "srchs_confirm_rival")):
        values = confirm_values(f, against)
        if values is None or (against == "rival" and values == confirm_values(f)):
            continue
        chosen, other = format_value(values[1]), format_value(values[0])
        label = f"Confirm: run {chosen} vs {other} with repeats until decided"
        kind: Any = "primary" if against == lead else "secondary"
        if st.button(label, type=kind, disabled=busy, key=key):
            _start(path, row, f, against)


def _start(path: Path, row: Mapping[str, Any], f: Mapping[str, Any], against: str) -> None:
    settings = load_settings()
    try:
        engine = None if row["spec"].get("base_url") else current_spec(settings)
        exp_id = plan_confirm(
            path,
            f,
            spec_from_json(row["spec"], engine),
            against,
            author=settings.resolved_author(),
            host=settings.resolved_host(),
        )
    except (ValueError, EngineError) as exc:
        st.error(f"refused: {md_escape(exc)}")
        return
    spawn_runner(path, exp_id)
    st.success(f"Experiment {exp_id} started in its own process; closing this tab stops nothing.")
    st.page_link("app_pages/3_Live.py", label="Watch it live", icon=ICONS["live"])
