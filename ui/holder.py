"""The one line naming what holds this machine (tuning.decide.holder), drawn the same way on Home,
Live and New experiment, so no page says "nothing runs" while another says something does."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from tuning.decide.holder import holder_line
from ui.common import md_escape

HOLDER_ICON = ":material/lock:"


def render_holder(db_path: Path, then: str = "") -> bool:
    """The holder's line (with `then`, the page's own advice, after it); whether one holds it.
    Only reads: the page reaps what died first (tuning.decide.reaper.reap_dead)."""
    line = holder_line(db_path)
    if line is None:
        return False
    st.info(f"{md_escape(line)}. {then}".rstrip(), icon=HOLDER_ICON)
    return True
