"""The app's entry (`make run` serves it through ui/serve.py): Streamlit's navigation over the
pages of ui.navigation (each page's sidebar label and URL path set there, "Home" first), and the
scope of each render (ui.common.render_db): the one DB connection a page reads through is opened
on its first use and closed here when the page is drawn, or stops."""

from __future__ import annotations

import streamlit as st

from ui.common import render_db
from ui.navigation import PAGES

page = st.navigation(
    [
        st.Page(p.file, title=p.label, default=True)
        if p.default
        else st.Page(p.file, title=p.label, url_path=p.url_path)
        for p in PAGES
    ]
)
with render_db():
    page.run()
