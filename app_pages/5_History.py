"""History: every run and experiment; filter, sort, annotate (notes, tags), hide, delete, share."""

from __future__ import annotations

import streamlit as st

from tuning.decide.reaper import reap_dead
from ui import history
from ui.common import ICONS, db, lab_db_path
from ui.share import render_sharing

st.set_page_config(
    page_title="History · vLLM Tuning Lab", page_icon=ICONS["history"], layout="wide"
)
st.title("History")
st.caption("Every run and experiment in this lab's database: filter, sort, annotate, hide, delete.")
history.show_flash()
reap_dead(lab_db_path())  # a killed runner's runs read failed, not running
connection = db()
runs_pane, exps_pane = st.tabs(["Runs", "Experiments"])
with runs_pane:
    history.runs_tab(connection, lab_db_path())
with exps_pane:
    history.experiments_tab(connection, lab_db_path())

render_sharing(lab_db_path())
