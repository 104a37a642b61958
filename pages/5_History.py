"""History view of the running experiment (filled in by the dashboard work)."""
from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="History · vLLM Tuning Lab", layout="wide")
st.title("History")
st.info("placeholder")
