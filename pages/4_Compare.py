"""Compare view of the running experiment (filled in by the dashboard work)."""
from __future__ import annotations

import streamlit as st

st.set_page_config(page_title="Compare · vLLM Tuning Lab", layout="wide")
st.title("Compare")
st.info("placeholder")
