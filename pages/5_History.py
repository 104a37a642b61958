"""History: every run and experiment; filter, sort, annotate (notes, tags), hide, delete.

Edits go straight to the DB through callbacks, so the table redrawn after a click already shows
them. Nothing about a job is kept in session state, only what the widgets hold.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from core.status import is_active
from store import open_db, queries, repo
from ui.common import db, db_path
from ui.share import render_sharing

SORTS = {
    "newest first": ("id", False),
    "oldest first": ("id", True),
    "output throughput": ("output_throughput", False),
    "mean TTFT": ("mean_ttft_ms", True),
    "mean TPOT": ("mean_tpot_ms", True),
    "peak RSS": ("peak_tree_rss_bytes", True),
    "experiment": ("experiment_id", False),
}
SEARCHED = (
    "param",
    "value",
    "status",
    "failure_kind",
    "model",
    "hardware",
    "engine",
    "author",
    "host",
    "notes",
    "tags",
    "experiment_name",
)


def _flash(kind: str, text: str) -> None:
    st.session_state["hist_flash"] = (kind, text)


def _save_run(path: Path, run_id: int) -> None:
    notes = st.session_state.get(f"hist_notes_{run_id}", "")
    tags = st.session_state.get(f"hist_tags_{run_id}", "")
    repo.update_run(open_db(path), run_id, notes=notes, tags=tags)
    _flash("success", f"run {run_id}: notes and tags saved")


def _toggle_run_hidden(path: Path, run_id: int, hidden: bool) -> None:
    repo.update_run(open_db(path), run_id, hidden=0 if hidden else 1)
    _flash("success", f"run {run_id} {'shown again' if hidden else 'hidden'}")


def _delete_run(path: Path, run_id: int) -> None:
    conn = open_db(path)
    if queries.get_run(conn, run_id)["status"] in ("running", "pending"):
        _flash("error", f"run {run_id} is still running: stop its experiment first")
        return
    repo.delete_run(conn, run_id)
    st.session_state.pop("hist_confirm_delete", None)
    _flash("success", f"run {run_id} and its request rows and samples deleted")


def _save_exp(path: Path, exp_id: int) -> None:
    repo.update_experiment(
        open_db(path),
        exp_id,
        notes=st.session_state.get(f"hist_exp_notes_{exp_id}", ""),
        tags=st.session_state.get(f"hist_exp_tags_{exp_id}", ""),
    )
    _flash("success", f"experiment {exp_id}: notes and tags saved")


def _toggle_exp_hidden(path: Path, exp_id: int, hidden: bool) -> None:
    repo.update_experiment(open_db(path), exp_id, hidden=0 if hidden else 1)
    _flash("success", f"experiment {exp_id} {'shown again' if hidden else 'hidden'}")


def _delete_exp(path: Path, exp_id: int) -> None:
    conn = open_db(path)
    if is_active(queries.get_experiment(conn, exp_id)["status"]):
        _flash("error", f"experiment {exp_id} is active: stop it first")
        return
    repo.delete_experiment(conn, exp_id)
    st.session_state.pop("hist_exp_confirm_delete", None)
    _flash("success", f"experiment {exp_id} and all its runs deleted")


def filter_runs(frame: pd.DataFrame) -> pd.DataFrame:
    c1, c2, c3, c4 = st.columns([1, 1, 1, 2])
    statuses = c1.multiselect(
        "Status", sorted(frame["status"].dropna().unique()), key="hist_status"
    )
    params = c2.multiselect("Parameter", sorted(frame["param"].dropna().unique()), key="hist_param")
    authors = c3.multiselect("Author", sorted(frame["author"].dropna().unique()), key="hist_author")
    text = (
        c4.text_input("Search (notes, tags, value, model, hardware, failure …)", key="hist_text")
        .strip()
        .lower()
    )
    c5, c6, c7 = st.columns([1, 1, 2])
    show_hidden = c5.checkbox("Show hidden", key="hist_show_hidden")
    sort = c6.selectbox("Sort by", list(SORTS), key="hist_sort")
    out = frame
    if not show_hidden:
        out = out[out["hidden"].fillna(0).astype(int) == 0]
    if statuses:
        out = out[out["status"].isin(statuses)]
    if params:
        out = out[out["param"].isin(params)]
    if authors:
        out = out[out["author"].isin(authors)]
    if text:
        hay = out[list(SEARCHED)].fillna("").astype(str).agg(" ".join, axis=1).str.lower()
        hay = hay + " run " + out["id"].astype(str)
        out = out[hay.str.contains(text, regex=False)]
    column, ascending = SORTS[sort]
    return out.sort_values(column, ascending=ascending, na_position="last")


def runs_tab(conn: Any, path: Path) -> None:
    rows = queries.history_rows(conn)
    if not rows:
        st.info("No runs yet.")
        return
    frame = pd.DataFrame(rows)
    shown = filter_runs(frame)
    st.dataframe(
        shown,
        hide_index=True,
        key="hist_runs_table",
        column_order=[
            "id",
            "experiment_id",
            "param",
            "value",
            "repeat_index",
            "status",
            "output_throughput",
            "mean_ttft_ms",
            "mean_tpot_ms",
            "peak_tree_rss_bytes",
            "peak_kv_cache_usage_perc",
            "failure_kind",
            "author",
            "tags",
            "notes",
            "hidden",
            "hardware",
            "finished_at",
        ],
        column_config={
            "id": "run",
            "experiment_id": "exp",
            "repeat_index": "repeat",
            "output_throughput": st.column_config.NumberColumn("output tok/s", format="%.1f"),
            "mean_ttft_ms": st.column_config.NumberColumn("mean TTFT ms", format="%.1f"),
            "mean_tpot_ms": st.column_config.NumberColumn("mean TPOT ms", format="%.2f"),
            "peak_tree_rss_bytes": st.column_config.NumberColumn("peak RSS", format="bytes"),
            "peak_kv_cache_usage_perc": st.column_config.NumberColumn(
                "peak KV usage", format="percent"
            ),
            "failure_kind": "failure",
        },
    )
    st.caption(
        f"{len(shown)} of {len(frame)} runs. TTFT = time to first token; TPOT = "
        "(E2EL − TTFT) / (output tokens − 1); output tok/s = successful output tokens / "
        "(first dispatch → last completion)."
    )
    ids = [int(i) for i in shown["id"]]
    if not ids:
        return
    pick = st.multiselect(
        "Compare these runs", ids, key="hist_compare_runs", format_func=lambda i: f"run {i}"
    )
    if pick:
        st.page_link(
            "pages/4_Compare.py",
            label=f"Open {len(pick)} runs in Compare",
            icon="⚖️",
            query_params={"runs": ",".join(map(str, pick))},
        )
    st.markdown("##### Edit a run")
    by_id = {int(r["id"]): r for r in rows}
    rid = st.selectbox(
        "Run",
        ids,
        key="hist_edit_run",
        format_func=lambda i: (
            f"run {i} · {by_id[i]['param']} = {by_id[i]['value']} · {by_id[i]['status']}"
        ),
    )
    run = by_id[int(rid)]
    st.text_area("Notes", value=run.get("notes") or "", key=f"hist_notes_{rid}", height=80)
    st.text_input("Tags (comma-separated)", value=run.get("tags") or "", key=f"hist_tags_{rid}")
    hidden = bool(run.get("hidden"))
    b1, b2, b3, b4 = st.columns([1, 1, 2, 1])
    b1.button("Save notes and tags", key="hist_save", on_click=_save_run, args=(path, int(rid)))
    b2.button(
        "Unhide" if hidden else "Hide",
        key="hist_hide",
        on_click=_toggle_run_hidden,
        args=(path, int(rid), hidden),
    )
    confirm = b3.checkbox(
        f"Yes, delete run {rid} with its request rows and samples", key="hist_confirm_delete"
    )
    b4.button(
        "Delete run",
        key="hist_delete",
        type="primary",
        disabled=not confirm,
        on_click=_delete_run,
        args=(path, int(rid)),
    )


def experiments_tab(conn: Any, path: Path) -> None:
    exps = queries.list_experiments(conn, include_hidden=True)
    if not exps:
        st.info("No experiments yet.")
        return
    show_hidden = st.checkbox("Show hidden experiments", key="hist_exp_show_hidden")
    shown = [e for e in exps if show_hidden or not e.get("hidden")]
    frame = pd.DataFrame(
        [
            {
                "id": e["id"],
                "name": e["name"],
                "param": e["param"],
                "status": e["status"],
                "runs": f"{e.get('runs_done') or 0} / {e.get('runs_total') or 0}",
                "repeats": e.get("repeats"),
                "author": e.get("author"),
                "tags": e.get("tags"),
                "notes": e.get("notes"),
                "hidden": bool(e.get("hidden")),
                "created": e.get("created_at"),
            }
            for e in shown
        ],
        columns=[
            "id",
            "name",
            "param",
            "status",
            "runs",
            "repeats",
            "author",
            "tags",
            "notes",
            "hidden",
            "created",
        ],
    )
    st.dataframe(frame, hide_index=True, key="hist_experiments_table")
    if not shown:
        return
    by_id = {int(e["id"]): e for e in shown}
    eid = st.selectbox(
        "Experiment",
        list(by_id),
        key="hist_edit_experiment",
        format_func=lambda i: f"experiment {i}: {by_id[i]['name']} ({by_id[i]['status']})",
    )
    exp = by_id[int(eid)]
    st.page_link(
        "pages/4_Compare.py",
        label="Compare its runs",
        icon="⚖️",
        query_params={"experiment": str(eid)},
    )
    st.text_area("Notes", value=exp.get("notes") or "", key=f"hist_exp_notes_{eid}", height=80)
    st.text_input("Tags (comma-separated)", value=exp.get("tags") or "", key=f"hist_exp_tags_{eid}")
    active = is_active(exp["status"])
    hidden = bool(exp.get("hidden"))
    b1, b2, b3, b4 = st.columns([1, 1, 2, 1])
    b1.button("Save notes and tags", key="hist_exp_save", on_click=_save_exp, args=(path, int(eid)))
    b2.button(
        "Unhide" if hidden else "Hide",
        key="hist_exp_hide",
        on_click=_toggle_exp_hidden,
        args=(path, int(eid), hidden),
    )
    confirm = b3.checkbox(
        f"Yes, delete experiment {eid} and all its runs",
        key="hist_exp_confirm_delete",
        disabled=active,
    )
    b4.button(
        "Delete experiment",
        key="hist_exp_delete",
        type="primary",
        disabled=active or not confirm,
        on_click=_delete_exp,
        args=(path, int(eid)),
        help="An active experiment must be stopped first." if active else None,
    )


st.set_page_config(page_title="History · vLLM Tuning Lab", layout="wide")
st.title("History")
st.caption("Every run and experiment in this lab's database: filter, sort, annotate, hide, delete.")
flash = st.session_state.pop("hist_flash", None)
if flash:
    getattr(st, flash[0])(flash[1])
connection = db()
runs_pane, exps_pane = st.tabs(["Runs", "Experiments"])
with runs_pane:
    runs_tab(connection, db_path())
with exps_pane:
    experiments_tab(connection, db_path())

render_sharing(db_path())
