"""Links from one page to another with what to open there in the URL, so the target page reads
its selection from the query (a link can be bookmarked or shared; nothing in session state)."""

from __future__ import annotations

import streamlit as st

from ui.common import ICONS

COMPARE_PAGE = "app_pages/4_Compare.py"


def compare_link(label: str, **query: object) -> None:
    """A link to Compare, e.g. `compare_link("Compare its runs", experiment=3)`; a list value is
    sent comma-separated (`runs=[1, 2]` -> `?runs=1,2`)."""
    params = {
        key: ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
        for key, value in query.items()
    }
    st.page_link(COMPARE_PAGE, label=label, icon=ICONS["compare"], query_params=params)
