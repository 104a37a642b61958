"""Live: the running experiment (or the latest, or ?experiment=N) read from the DB every 1.5 s.

Closing the tab stops nothing and reopening it loses nothing: the runner is its own process and
everything drawn here comes from SQLite.
"""

from __future__ import annotations

import streamlit as st

from core.status import is_active
from store import queries
from tuning.decide.reaper import reap_dead
from tuning.decide.search.names import shown_names
from ui import live
from ui.common import ICONS, db, lab_db_path
from ui.holder import render_holder

st.set_page_config(page_title="Live · vLLM Tuning Lab", page_icon=ICONS["live"], layout="wide")
st.title("Live")
st.caption(
    "Progress, phase, memory, KV-cache usage, output tokens/s and the server log of the "
    "experiment, straight from the lab's database."
)

reap_dead(lab_db_path())  # a killed runner's experiment reads failed, not running
experiments = queries.list_experiments(db(), include_hidden=True)
shown = shown_names(db(), experiments)  # a search's step by its search's id, not its key
render_holder(lab_db_path())  # the same line as Home and New experiment: what runs, in which lab
exp = live.pick_experiment(experiments, st.query_params.get("experiment"), shown)
if exp is None:
    st.info("No experiment yet. Start one from **New experiment**.")
    st.stop()
active = is_active(exp["status"])
live.live_panel(lab_db_path(), int(exp["id"]), active)
latest = max(int(e["id"]) for e in experiments)
if not active and not st.query_params.get("experiment") and int(exp["id"]) == latest:
    # Showing the latest, finished experiment: switch when a new one starts anywhere.
    live.watch_for_new_experiment(lab_db_path(), int(exp["id"]))
