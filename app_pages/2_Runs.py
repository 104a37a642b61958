"""Every run with its key numbers, side by side; a failed start shows its kind and hint, a
suspect run why its numbers cannot be true."""

from __future__ import annotations

import streamlit as st

from core.status import Status, suspect_reasons
from store import queries
from tuning.decide.reaper import reap_dead
from tuning.decide.search.names import shown_names
from ui.common import ICONS, db, lab_db_path, md_escape
from ui.findings import render_findings
from ui.health import health_badge, render_config_mismatches, render_run_health, server_gap_ms
from ui.predict import prediction_columns
from ui.tables import RUNS_PAGE_KEYS, render_run_table
from ui.words import failure_words

st.set_page_config(page_title="Runs · vLLM Tuning Lab", page_icon=ICONS["runs"], layout="wide")
st.title("Runs")
reap_dead(lab_db_path())  # a killed runner's runs read failed, not running
conn = db()
experiments = queries.list_experiments(conn)
options = [None] + [e["id"] for e in experiments]
shown = shown_names(conn, experiments)  # a search's step by its search's id, not its key
names = {e["id"]: f"{e['id']}: {shown[int(e['id'])]} ({e['status']})" for e in experiments}
chosen = st.selectbox(
    "Experiment",
    options,
    key="runs_experiment",
    format_func=lambda i: "all experiments" if i is None else names[i],
)
runs = queries.list_runs(conn, chosen)
if not runs:
    st.info("No runs yet. Start an experiment from **New experiment**.")
    st.stop()


def client_minus_server(run: dict) -> dict:
    gap = server_gap_ms(run)
    return {"TTFT client − server (ms)": None if gap is None else round(gap, 1)}


def extra_columns(run: dict) -> dict:
    return {**client_minus_server(run), **prediction_columns(run)}


render_run_table(runs, RUNS_PAGE_KEYS, "runs_table", extra=extra_columns)
st.caption(
    "TTFT = time to first token; TPOT = (E2EL − TTFT) / (output tokens − 1) per request; "
    "output tok/s = successful output tokens / (first dispatch → last completion). "
    "Hover a column's name for its formula; — = not reported (by the engine, for its facts). "
    "TTFT client − server = the client's mean TTFT minus vLLM's own time_to_first_token "
    "histogram mean over the same window (HTTP, tokenizing and the client's own delay); a run "
    "beyond the bound is flagged in its health. "
    "KV tokens predicted: tuning.engine.predict from the model's config.json before the start; "
    "prediction error %: against the engine's KV capacity."
)
render_config_mismatches(runs, "runs_config_mismatch")
measured = [r for r in runs if r.get("health")]
if measured:
    st.subheader("Run health and memory facts")
    by_id = {int(r["id"]): r for r in measured}

    def label(run_id: int) -> str:
        run = by_id[run_id]
        return f"run {run_id}: {run['param']} = {run['value']} ({health_badge(run)})"

    chosen = st.selectbox("Run", list(by_id), key="runs_health_run", format_func=label)
    render_run_health(by_id[int(chosen)])
    render_findings(conn, by_id[int(chosen)], "runs_findings")
for r in (r for r in runs if r["status"] == Status.SUSPECT):
    with st.expander(f"run {r['id']} suspect: not counted in verdicts", expanded=True):
        st.markdown(  # the words quote a server's numbers: escaped, not markdown
            "A number from the server failed a plausibility check, so the run is kept but left "
            "out of Compare's verdicts, reuse and estimates (Compare can count it on request):\n\n"
            + "\n".join(f"- {md_escape(why)}" for why in suspect_reasons(r))
        )
failed = [r for r in runs if r["status"] == Status.FAILED]
for r in failed:
    with st.expander(f"run {r['id']} failed: {md_escape(failure_words(r['failure_kind']))}"):
        st.markdown(
            f"**Reason:** {md_escape(r['failure_reason'])}\n\n"
            f"**Hint:** {md_escape(r['failure_hint'])}"
        )
        if r.get("log_tail"):
            st.code(r["log_tail"][-4000:], language="text")
