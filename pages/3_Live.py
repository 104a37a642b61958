"""Live view of the running experiment (filled in by the dashboard work)."""
from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Live · vLLM Tuning Lab", layout="wide")
st.title("Live")
st.info("placeholder")
