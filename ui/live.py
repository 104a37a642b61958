"""Render helpers for the Live page. Everything is read from the DB on every tick, so a closed and
reopened tab, or two tabs, show the same thing; nothing about the job lives in session state."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from core.clock import age_s
from core.status import Status, is_active
from store import StoreError, connect, queries, timeseries
from tuning.compare.comparison import request_columns
from tuning.compare.present import fmt
from tuning.decide.reaper import reap_dead
from tuning.engine.params import run_value
from tuning.engine.startup_anatomy import anatomy_text, phase_rows
from tuning.experiment.estimate import left_text
from tuning.experiment.supervisor import STALE_AFTER_S, cancel_experiment
from tuning.measure.telemetry.completeness import sample_gaps
from tuning.present.charts.build import drawn_series
from tuning.present.charts.kinds import (
    DASHBOARD_SERIES,
    MEMORY_SERIES,
    PREALLOCATION_NOTE,
    memory_series_for,
)
from tuning.present.charts.startup import startup_chart
from tuning.present.charts.timeseries import live_chart, tokens_rate_from_requests
from tuning.settings import lab_home
from ui.common import ICONS
from ui.common import md_escape as esc
from ui.links import compare_link
from ui.tables import KEY_NUMBERS, KV_USAGE, render_run_table
from ui.time_spent import render_time_spent, render_timeline
from ui.words import phase_words

POLL_S = 1.5
LIVE_KEYS = (
    "id",
    "value",
    *KEY_NUMBERS,
    "status",
    "repeat_index",
    KV_USAGE,
    "peak_tree_rss_bytes",
    "failure_kind",
)
LOG_TAIL_BYTES = 12_000
# uvicorn's access line: 'INFO:     127.0.0.1:52310 - "POST /v1/completions HTTP/1.1" 200 OK'
ACCESS_LINE = re.compile(r'" *[A-Z]+ /\S* HTTP/\d(?:\.\d)?" \d{3}')


def pick_experiment(
    experiments: Sequence[Mapping[str, Any]],
    query_value: Any,
    shown: Mapping[int, str] | None = None,
) -> Mapping[str, Any] | None:
    """The experiment to show: ?experiment=N, else the active one, else the latest; `shown`
    its names as a user reads them (tuning.decide.search.names), else the stored ones."""
    shown = shown or {}
    if not experiments:
        return None
    ids = [int(e["id"]) for e in experiments]
    active = [int(e["id"]) for e in experiments if is_active(e["status"])]
    wanted = None
    try:
        wanted = int(str(query_value)) if query_value not in (None, "") else None
    except ValueError:
        wanted = None
    if wanted in ids:
        default = wanted
    elif active:
        default = active[-1]
    else:
        default = ids[0]
    # No status in the label: the selector is drawn once per page load, the panel below is live.
    names = {
        int(e["id"]): f"experiment {e['id']}: {shown.get(int(e['id']), e['name'])}"
        for e in experiments
    }
    switch = st.session_state.pop("live_switch_to", None)
    if switch in ids:
        st.session_state["live_experiment"] = switch  # before the widget exists
    chosen = st.selectbox(
        "Experiment",
        ids,
        index=ids.index(default),
        key="live_experiment",
        format_func=lambda i: names[i],
    )
    return next(e for e in experiments if int(e["id"]) == chosen)


def read_log_tail(run: Mapping[str, Any], max_bytes: int = LOG_TAIL_BYTES) -> str:
    """The end of the run's server log; only files under the lab's home are read (a DB shared by
    a teammate must not make this page print an arbitrary file), else the stored log_tail."""
    raw = run.get("log_path")
    if raw:
        try:
            path = Path(raw).resolve()
            home = lab_home().resolve()
            if path.is_relative_to(home) and path.is_file():
                with open(path, "rb") as fh:
                    size = fh.seek(0, os.SEEK_END)
                    fh.seek(max(0, size - max_bytes))
                    data = fh.read().decode("utf-8", errors="replace")
                if size > max_bytes and "\n" in data:
                    data = data.split("\n", 1)[1]
                return data
        except OSError:
            pass
    return str(run.get("log_tail") or "")[-max_bytes:]


def current_run(db: Any, exp: Mapping[str, Any]) -> dict[str, Any] | None:
    """The run being measured now, else the experiment's last run."""
    rid = exp.get("current_run_id")
    if rid:
        try:
            return queries.get_run(db, int(rid))
        except StoreError:
            pass
    runs = queries.list_runs(db, int(exp["id"]), include_hidden=True)
    return runs[-1] if runs else None


def render_progress(exp: Mapping[str, Any], run: Mapping[str, Any] | None, left: str = "") -> None:
    """Runs done of the total, `left` (the estimate's "about 3 min left") while it runs."""
    active = is_active(exp["status"])
    with st.container(key="live_progress", border=True):
        total = max(int(exp.get("runs_total") or 0), 1)
        done = int(exp.get("runs_done") or 0)
        st.progress(
            min(1.0, done / total),
            text=f"values done: {done} of {int(exp.get('runs_total') or 0)} "
            f"(runs, repeats included)" + (f"; {left}" if active and left else ""),
        )
        if active and run is not None:
            r_total = int(exp.get("requests_total") or 0)
            r_done = int(exp.get("requests_done") or 0)
            where = "the runs in flight" if exp.get("fleet") else f"run {run['id']}"
            st.progress(
                min(1.0, r_done / r_total) if r_total else 0.0,
                text=f"requests done in {where}: {r_done} of {r_total}",
            )
        cols = st.columns(4)
        # Text from the row is escaped: the experiment may be a teammate's bundle.
        cols[0].markdown(f"**status**  \n{esc(exp['status'])}")
        cols[1].markdown(f"**phase**  \n{esc(phase_words(exp.get('phase')))}")
        if run is not None:
            cols[2].markdown(
                f"**current run**  \n{run['id']}: {esc(run.get('param'))} = "
                f"{esc(run_value(run))} ({esc(phase_words(run.get('phase') or run.get('status')))})"
            )
        if active:
            age = age_s(exp.get("heartbeat_at"))  # infinite until the first beat
            stale = math.isfinite(age) and age > STALE_AFTER_S
            shown = fmt(age, spec="{:.0f}") if math.isfinite(age) else "—"
            cols[3].markdown(
                f"**runner heartbeat**  \n{shown} s ago"
                + (f" {ICONS['warning']} stale" if stale else "")
            )
            if stale:
                st.warning(
                    "The runner has not written a heartbeat for a while: it may have "
                    "died. The home page marks such experiments failed."
                )
        if exp.get("cancel_requested") and active:
            st.info("Stop requested: the runner stops the server and marks the run cancelled.")
        if exp.get("error"):
            st.error(esc(exp["error"]))


def render_stop(db_path: Path, exp: Mapping[str, Any]) -> None:
    """Ask the runner to stop (it polls the flag with its heartbeat); never kills from the UI."""
    if not is_active(exp["status"]):
        return
    if st.button(
        "Stop experiment",
        key="live_stop",
        type="primary",
        disabled=bool(exp.get("cancel_requested")),
        help="The runner stops the server by process group and marks the run "
        "cancelled; finished runs are kept.",
    ):
        cancel_experiment(db_path, int(exp["id"]))
        st.toast("Stop requested")


def live_series(
    db: Any, run_id: int, max_points: int = 400
) -> dict[str, list[tuple[float, float]]]:
    have = drawn_series(db, [run_id])
    return {
        name: timeseries.load_series(db, run_id, name, max_points=max_points, sum_labels=True)
        for name in DASHBOARD_SERIES
        if name in have
    }


def render_run_charts(db: Any, run: Mapping[str, Any]) -> None:
    """Memory, KV usage %, output tokens/s, running & waiting on one time axis."""
    series = live_series(db, int(run["id"]))
    memory = memory_series_for(series)
    tokens = None
    if "generation_tokens_total" not in series and run.get("status") == Status.DONE:
        window = (run.get("summary") or {}).get("load_window_s") or [0.0, 0.0]
        cols = request_columns(db, int(run["id"]), with_itl=True)
        tokens = tokens_rate_from_requests(cols, offset_s=float(window[0] or 0.0))
    if not series and not tokens:
        st.caption("No samples for this run yet (they start with the server process).")
        return
    live = is_active(run.get("status"))
    title = "This run, live" if live else f"Run {run['id']} ({run.get('status')})"
    chart = live_chart(series, memory or "tree_rss_bytes", tokens, title=title)
    with st.container(key="live_charts"):
        st.altair_chart(chart, key="live_chart")
        sampled = dict(MEMORY_SERIES).get(memory or "")
        st.caption(
            "Output tokens/s = increase of vllm:generation_tokens_total / time between "
            "scrapes. "
            + (f"Memory = {sampled}. " if sampled else "No memory series was sampled. ")
            + PREALLOCATION_NOTE
        )
        health = run.get("health")
        for gap in sample_gaps(health if isinstance(health, dict) else None):  # holes, named
            st.warning(esc(gap), icon=ICONS["warning"])


def render_run_startup(run: Mapping[str, Any]) -> None:
    """The run's server start as a timeline of its phases, once it was healthy."""
    anat = (run.get("startup") or {}).get("anatomy")
    if not anat:
        return
    with st.container(key="live_startup"):
        rows = phase_rows([(f"run {run['id']}", anat)])
        st.altair_chart(startup_chart(rows), key="live_startup_chart")
        st.caption(anatomy_text(anat))


def without_access_lines(text: str) -> tuple[str, int]:
    """The log without the API server's one-line-per-request access log (under load it is all
    a tail shows); returns the rest and how many lines were left out."""
    lines = text.splitlines()
    kept = [line for line in lines if not ACCESS_LINE.search(line)]
    return "\n".join(kept), len(lines) - len(kept)


def render_log(run: Mapping[str, Any]) -> None:
    tail, dropped = without_access_lines(read_log_tail(run))
    with st.container(key="live_log"):
        st.markdown(f"**Server log** (run {run['id']}, last lines)")
        if tail:
            st.code(tail[-LOG_TAIL_BYTES:], language="text", height=260)
            if dropped:
                st.caption(f"{dropped:,} HTTP access lines (one per request) left out.")
        else:
            st.caption("no log yet" if is_active(run.get("status")) else "no server log kept")


def render_anatomy(db: Any, exp: Mapping[str, Any]) -> None:
    """Where each run's time went (the run in flight so far), and the experiment's in a line."""
    runs = queries.list_runs(db, int(exp["id"]), include_hidden=True)
    if not any(r.get("anatomy") for r in runs):
        return
    with st.container(key="live_anatomy"):
        render_timeline(runs, "live_anatomy_chart")
        render_time_spent(db, runs, "live_time_spent")


def render_runs_table(db: Any, exp: Mapping[str, Any]) -> None:
    runs = queries.list_runs(db, int(exp["id"]), include_hidden=True)
    if not runs:
        return
    render_run_table(
        runs,
        LIVE_KEYS,
        "live_runs_table",
        extra=(lambda r: _placement(exp, r)) if exp.get("fleet") else None,
    )


def _placement(exp: Mapping[str, Any], run: Mapping[str, Any]) -> dict[str, Any]:
    """On the fleet several runs are in flight at once: each one's phase, slot and node."""
    if not exp.get("fleet"):
        return {}
    return {
        "phase": phase_words(run.get("phase")),
        "slot": run.get("slot"),
        "node": run.get("node_host"),
        "attempt": run.get("attempt"),
    }


def in_flight(db: Any, exp: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The experiment's runs not finished yet (on the fleet, several at once)."""
    runs = queries.list_runs(db, int(exp["id"]), include_hidden=True)
    return [r for r in runs if is_active(r["status"])]


def pick_flight(flights: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """Every run in flight, one line each; the one whose charts and log are drawn below."""
    with st.container(key="live_flights", border=True):
        st.markdown(f"**{len(flights)} runs in flight**")
        for r in flights:
            st.markdown(
                f"- run {r['id']}: {esc(r.get('param'))} = {esc(run_value(r))}, "
                f"{esc(phase_words(r.get('phase') or r.get('status')))} "
                f"on slot {esc(r.get('slot') or '—')} "
                f"({esc(r.get('node_host') or '—')}), attempt {r.get('attempt') or 1}"
            )
        ids = [int(r["id"]) for r in flights]
        chosen = st.selectbox(
            "Charts and log of", ids, key="live_flight", format_func=lambda i: f"run {i}"
        )
    return next(r for r in flights if int(r["id"]) == chosen)


def panel(db_path: Path, experiment_id: int, was_active: bool) -> None:
    """One tick: reap (a runner killed while watched shows failed), read the experiment and its
    current run from the DB, draw everything."""
    reap_dead(db_path)
    with connect(db_path, readonly=True) as db:
        try:
            exp = queries.get_experiment(db, experiment_id)
        except StoreError:
            st.warning(f"experiment {experiment_id} no longer exists")
            return
        active = is_active(exp["status"])
        if was_active and not active:
            st.rerun()  # finished: a full rerun swaps to the final view and stops the polling
        run = current_run(db, exp)
        flights = in_flight(db, exp) if exp.get("fleet") and active else []
        render_progress(exp, run, left_text(db, exp) if active else "")
        render_stop(db_path, exp)
        if not active:
            st.success(f"Experiment {exp['id']} is {esc(exp['status'])}. Final state below.")
            compare_link("Compare its runs", experiment=exp["id"])
        if len(flights) > 1:
            run = dict(pick_flight(flights))
        if run is not None:
            render_run_charts(db, run)
            render_run_startup(run)
            render_anatomy(db, exp)
            render_log(run)
        render_runs_table(db, exp)


def live_panel(db_path: Path, experiment_id: int, active: bool) -> None:
    """Poll every 1.5 s while the experiment is active; a static panel otherwise."""
    fragment = st.fragment(panel, run_every=POLL_S if active else None)
    fragment(db_path, experiment_id, active)


def _newer_active(db_path: Path, shown_id: int) -> int | None:
    with connect(db_path, readonly=True) as db:
        active = [int(e["id"]) for e in queries.active_experiments(db)]
    return active[-1] if active and active[-1] != shown_id else None


def watch_for_new_experiment(db_path: Path, shown_id: int) -> None:
    """While a finished experiment is shown, look every 5 s for one started elsewhere (another
    tab, a teammate's CLI) and switch to it, so an open Live tab never goes stale."""

    @st.fragment(run_every=5)
    def watcher() -> None:
        newer = _newer_active(db_path, shown_id)
        if newer is not None:
            st.session_state["live_switch_to"] = newer  # a UI choice, not job state
            st.rerun()

    watcher()
