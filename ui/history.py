"""Render helpers for the History page: the runs and experiments tabs, their filters and the
editor (notes, tags, hide, delete) that runs and experiments share.

Edits go straight to the DB through button callbacks, so the table redrawn after a click already
shows them. Session state holds only what the widgets hold and one message for the next rerun.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st
from sqlite_utils import Database

from core.status import is_active
from store import connect, queries, repo
from tuning.decide.search.names import shown_names
from tuning.engine.params import run_value
from tuning.experiment.history import SORTS, RunFilter, choices
from ui.common import md_escape
from ui.links import compare_link
from ui.tables import KEY_NUMBERS, KV_USAGE, RUN_IDENTITY, RUN_PLACE, render_run_table

FLASH_KEY = "hist_flash"
# History is where runs get tags and notes: they come right after which run it is.
RUN_COLUMNS = (
    *RUN_IDENTITY,
    "tags",
    "notes",
    *KEY_NUMBERS,
    "status",
    *RUN_PLACE,
    "peak_tree_rss_bytes",
    KV_USAGE,
    "failure_kind",
    "author",
    "hidden",
    "hardware",
    "finished_at",
)
EXPERIMENT_COLUMNS = [
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
]


@dataclass(frozen=True)
class Editable:
    """A kind of row History edits: runs and experiments differ only in these."""

    noun: str  # "run" or "experiment"
    key: str  # prefix of its widget keys
    update: Callable[..., None]  # repo.update_run / repo.update_experiment
    delete: Callable[[Database, int], None]  # refuses an active row (repo.ActiveRowError)
    goes_with_it: str  # what a delete takes along
    stop_first: str  # what to stop before it can be deleted


RUN = Editable(
    "run",
    "hist_",
    repo.update_run,
    repo.delete_run,
    "and its request rows and samples",
    "its experiment",
)
EXPERIMENT = Editable(
    "experiment",
    "hist_exp_",
    repo.update_experiment,
    repo.delete_experiment,
    "and all its runs",
    "it",
)


def show_flash() -> None:
    """The message a callback left for this rerun, once."""
    flash = st.session_state.pop(FLASH_KEY, None)
    if flash:
        getattr(st, flash[0])(flash[1])


def _flash(kind: str, text: str) -> None:
    st.session_state[FLASH_KEY] = (kind, text)


def _save(kind: Editable, path: Path, row_id: int) -> None:
    notes = st.session_state.get(f"{kind.key}notes_{row_id}", "")
    tags = st.session_state.get(f"{kind.key}tags_{row_id}", "")
    with connect(path) as db:
        kind.update(db, row_id, notes=notes, tags=tags)
    _flash("success", f"{kind.noun} {row_id}: notes and tags saved")


def _toggle_hidden(kind: Editable, path: Path, row_id: int, hidden: bool) -> None:
    with connect(path) as db:
        kind.update(db, row_id, hidden=0 if hidden else 1)
    _flash("success", f"{kind.noun} {row_id} {'shown again' if hidden else 'hidden'}")


def _delete(kind: Editable, path: Path, row_id: int) -> None:
    try:
        with connect(path) as db:
            kind.delete(db, row_id)
    except repo.ActiveRowError as exc:  # it became active since the page was drawn
        _flash("error", md_escape(exc))
        return
    st.session_state.pop(f"{kind.key}confirm_delete", None)
    _flash("success", f"{kind.noun} {row_id} {kind.goes_with_it} deleted")


def render_editor(kind: Editable, path: Path, row: Mapping[str, Any]) -> None:
    """Notes and tags, hide or unhide, and delete behind a confirmation box."""
    row_id, k = int(row["id"]), kind.key
    st.text_area("Notes", value=row.get("notes") or "", key=f"{k}notes_{row_id}", height=80)
    st.text_input("Tags (comma-separated)", value=row.get("tags") or "", key=f"{k}tags_{row_id}")
    active = is_active(row.get("status"))
    hidden = bool(row.get("hidden"))
    buttons = st.container(horizontal=True, vertical_alignment="center", key=f"{k}buttons")
    b1 = b2 = b3 = b4 = buttons  # one row, each button as wide as its words
    b1.button("Save notes and tags", key=f"{k}save", on_click=_save, args=(kind, path, row_id))
    b2.button(
        "Unhide" if hidden else "Hide",
        key=f"{k}hide",
        on_click=_toggle_hidden,
        args=(kind, path, row_id, hidden),
    )
    confirm = b3.checkbox(
        f"Yes, delete {kind.noun} {row_id} {kind.goes_with_it}",
        key=f"{k}confirm_delete",
        disabled=active,
    )
    b4.button(
        f"Delete {kind.noun}",
        key=f"{k}delete",
        type="primary",
        disabled=active or not confirm,
        on_click=_delete,
        args=(kind, path, row_id),
        help=f"Still {row.get('status')}: stop {kind.stop_first} first." if active else None,
    )


def run_filter(rows: list[dict[str, Any]]) -> RunFilter:
    """The filter widgets above the runs table."""
    c1, c2, c3, c4 = st.columns([1, 1, 1, 2])
    statuses = c1.multiselect("Status", choices(rows, "status"), key="hist_status")
    params = c2.multiselect("Parameter", choices(rows, "param"), key="hist_param")
    authors = c3.multiselect("Author", choices(rows, "author"), key="hist_author")
    text = c4.text_input("Search (notes, tags, value, model, hardware, failure …)", key="hist_text")
    c5, c6, _ = st.columns([1, 1, 2])
    show_hidden = c5.checkbox("Show hidden", key="hist_show_hidden")
    sort = c6.selectbox("Sort by", list(SORTS), key="hist_sort")
    return RunFilter(statuses, params, authors, text, show_hidden, sort)


def runs_tab(db: Database, path: Path) -> None:
    rows = queries.history_rows(db)
    if not rows:
        st.info("No runs yet.")
        return
    shown = run_filter(rows).apply(rows)
    render_run_table(shown, RUN_COLUMNS, "hist_runs_table")
    st.caption(
        f"{len(shown)} of {len(rows)} runs. TTFT = time to first token; TPOT = "
        "(E2EL − TTFT) / (output tokens − 1); output tok/s = successful output tokens / "
        "(first dispatch → last completion)."
    )
    by_id = {int(r["id"]): r for r in shown}
    if not by_id:
        return
    pick = st.multiselect(
        "Compare these runs", list(by_id), key="hist_compare_runs", format_func=lambda i: f"run {i}"
    )
    if pick:
        compare_link(f"Open {len(pick)} runs in Compare", runs=pick)
    st.markdown("##### Edit a run")
    rid = st.selectbox(
        "Run", list(by_id), key="hist_edit_run", format_func=lambda i: _run_label(by_id[i])
    )
    render_editor(RUN, path, by_id[int(rid)])


def _run_label(run: Mapping[str, Any]) -> str:
    return f"run {run['id']} · {run['param']} = {run_value(run)} · {run['status']}"


def _experiment_row(e: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {
        "id": e["id"],
        "name": name,
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


def experiments_tab(db: Database, path: Path) -> None:
    exps = queries.list_experiments(db, include_hidden=True)
    if not exps:
        st.info("No experiments yet.")
        return
    show_hidden = st.checkbox("Show hidden experiments", key="hist_exp_show_hidden")
    by_id = {int(e["id"]): e for e in exps if show_hidden or not e.get("hidden")}
    shown = shown_names(db, exps)  # a search's step by its search's id, not its key
    rows = [_experiment_row(e, shown[i]) for i, e in by_id.items()]
    frame = pd.DataFrame(rows, columns=EXPERIMENT_COLUMNS)
    st.dataframe(frame, hide_index=True, key="hist_experiments_table", placeholder="—")
    if not by_id:
        return
    eid = st.selectbox(
        "Experiment",
        list(by_id),
        key="hist_edit_experiment",
        format_func=lambda i: f"experiment {i}: {shown[i]} ({by_id[i]['status']})",
    )
    compare_link("Compare its runs", experiment=eid)
    render_editor(EXPERIMENT, path, by_id[int(eid)])
