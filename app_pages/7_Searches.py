"""Searches: a search as a result of its own: its choice (with its interval against the closest
rival, a named tie, or undecided; the confirm's result in the same line), each value's runs and
SLOs, the chart with the SLO lines and the knee, why each step ran, and one click to confirm the
choice with repeats (ui.searches); then
the plans, each a result of its own: every search's choice, start vs recommended, the gain and the
`vllm serve` command (ui.plans)."""

from __future__ import annotations

import streamlit as st

from tuning.decide.reaper import reap_dead
from ui import plans, searches
from ui.common import ICONS, lab_db_path

st.set_page_config(
    page_title="Searches · vLLM Tuning Lab", page_icon=ICONS["search"], layout="wide"
)
st.title("Searches")
st.caption(
    "Each search on its own: what it chose under the objective and the SLOs and how sure (an "
    "interval against the closest rival, or a tie named as one), why each step ran, and one "
    "click to run the choice against its rival or the baseline until the difference is decided."
)
reap_dead(lab_db_path())  # a search or plan whose process died reads failed
searches.render_searches(lab_db_path())
plans.render_plans(lab_db_path())
