"""Every run with its key numbers, side by side; a failed start shows its kind and hint."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.status import Status
from store import queries
from ui.common import db
from ui.health import config_badge, health_badge, render_config_mismatches, render_run_health

st.set_page_config(page_title="Runs · vLLM Tuning Lab", layout="wide")
st.title("Runs")
conn = db()
experiments = queries.list_experiments(conn)
options = [None] + [e["id"] for e in experiments]
names = {e["id"]: f"{e['id']}: {e['name']} ({e['status']})" for e in experiments}
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
COLUMNS = {
    "id": "run",
    "experiment_id": "exp",
    "param": "parameter",
    "value": "value",
    "repeat_index": "repeat",
    "status": "status",
    "output_throughput": "output tok/s",
    "request_throughput": "req/s",
    "mean_ttft_ms": "mean TTFT ms",
    "p99_ttft_ms": "p99 TTFT ms",
    "mean_tpot_ms": "mean TPOT ms",
    "mean_itl_ms": "mean ITL ms",
    "mean_e2el_ms": "mean E2EL ms",
    "completed": "completed",
    "failed": "failed",
    "kv_cache_tokens": "KV capacity (tokens)",
    "peak_kv_cache_usage_perc": "peak KV usage",
    "peak_tree_rss_bytes": "peak RSS (bytes)",
    "peak_gpu_tree_bytes": "peak GPU (bytes)",
    "preemptions": "preemptions",
    "time_to_healthy_s": "time to healthy s",
    "failure_kind": "failure",
    "author": "author",
}
frame = pd.DataFrame(
    [
        {
            **{label: r.get(key) for key, label in COLUMNS.items()},
            "health": health_badge(r),
            "config": config_badge(r),
        }
        for r in runs
    ]
)
st.dataframe(frame, hide_index=True, key="runs_table", width="stretch")
st.caption(
    "TTFT = time to first token; TPOT = (E2EL − TTFT) / (output tokens − 1) per request; "
    "output tok/s = successful output tokens / (first dispatch → last completion). "
    "Peak KV usage is vLLM's kv_cache_usage_perc (0–1)."
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
failed = [r for r in runs if r["status"] == Status.FAILED]
for r in failed:
    with st.expander(f"run {r['id']} failed: {r['failure_kind']}", expanded=False):
        st.markdown(f"**Reason:** {r['failure_reason']}\n\n**Hint:** {r['failure_hint']}")
        if r.get("log_tail"):
            st.code(r["log_tail"][-4000:], language="text")
