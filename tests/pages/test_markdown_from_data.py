"""Text from the DB is shown as text on every page (AppTest): a run value that is a Markdown image
(`![x](http://127.0.0.1:9/x.png)`, which the browser would fetch) and notes, names, failure
reasons, health reasons with bold, HTML, links, colour directives and LaTeX reach every element
Streamlit draws as Markdown (markdown, captions, headings, alerts, expander and widget labels,
help, progress text, page links) only backslash-escaped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.fakes.hostile import MD_IMAGE, MD_NOTES, seed_hostile_lab
from ui.common import md_code, md_escape

APP = str(Path(__file__).resolve().parents[2] / "app.py")
# What Streamlit would draw as something other than the characters themselves.
LIVE_MARKDOWN = (
    MD_IMAGE,
    "](http",
    "**bold**",
    "<img",
    "[link](javascript",
    ":red[",
    "$x^2$",
)
# Elements whose text Streamlit shows verbatim (not Markdown).
LITERAL_TYPES = {"code", "text", "json", "arrow_data_frame", "dataframe", "latex", "exception"}


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    home = tmp_path / "lab"
    monkeypatch.setenv("TUNING_LAB_HOME", str(home))
    monkeypatch.setenv("TUNING_LAB_DB", str(tmp_path / "lab.db"))
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", "")
    info = seed_hostile_lab(tmp_path / "lab.db", value=MD_IMAGE, text=MD_NOTES, with_active=True)
    yield info
    st.cache_data.clear()
    st.cache_resource.clear()


def _nodes(node: Any) -> Iterator[Any]:
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from _nodes(child)


def markdown_texts(at: AppTest) -> list[str]:
    """Every string on the page that Streamlit renders as Markdown."""
    out = []
    for node in _nodes(at._tree):
        proto = getattr(node, "proto", None)
        fields = getattr(getattr(proto, "DESCRIPTOR", None), "fields_by_name", None)
        if not fields or getattr(node, "type", "") in LITERAL_TYPES:
            continue
        for name in ("body", "label", "help", "text"):
            value = getattr(proto, name, None) if name in fields else None
            if isinstance(value, str) and value:
                out.append(value)
    return out


def _assert_shown_as_text(at: AppTest, page: str) -> None:
    assert not at.exception, at.exception
    texts = markdown_texts(at)
    live = [(s, t) for t in texts for s in LIVE_MARKDOWN if s in t]
    assert live == [], f"{page}: Markdown from data: {live[:3]}"
    joined = "\n".join(texts)
    assert md_escape(MD_IMAGE) in joined or md_escape(MD_NOTES) in joined, page


def _page(page: str | None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    if page:
        at.switch_page(page).run()
    return at


def test_md_escape_and_md_code() -> None:
    assert md_escape(MD_IMAGE) == "!\\[x\\](http\\://127.0.0.1:9/x.png)"
    assert md_escape("**a** <b> `c` _d_ ~e~ $f$ | &amp;") == (
        "\\*\\*a\\*\\* \\<b\\> \\`c\\` \\_d\\_ \\~e\\~ \\$f\\$ \\| \\&amp;"
    )
    assert md_escape("# h\n\n- item\r\n1. x") == "\\# h  - item  1. x"
    assert md_escape("- item") == "\\- item" and md_escape("12. x") == "12\\. x"
    assert md_escape("see www.example.com") == "see www\\.example.com"
    assert md_escape("max-num-seqs = 16, 1,234.5 ms: ok") == "max-num-seqs = 16, 1,234.5 ms: ok"
    assert md_escape(None) == "None" and md_escape(3) == "3"
    assert md_code("a`b``c\n\nd") == "``` a`b``c  d ```"


def test_home_page_shows_data_as_text(lab: dict[str, Any]) -> None:
    at = _page(None)
    _assert_shown_as_text(at, "home")
    joined = "\n".join(markdown_texts(at))
    assert md_escape(f"live {MD_NOTES}") in joined  # the running experiment's name
    assert md_escape(MD_IMAGE) in joined  # the latest runs' values


def test_runs_page_shows_data_as_text(lab: dict[str, Any]) -> None:
    at = _page("pages/2_Runs.py")
    _assert_shown_as_text(at, "Runs")
    assert any(md_escape(MD_NOTES) in e.label for e in at.expander)  # the failure kind
    assert any(md_escape(MD_NOTES) in w.value for w in at.warning)  # a health reason


@pytest.mark.parametrize(
    "page", ["pages/3_Live.py", "pages/4_Compare.py", "pages/5_History.py"], ids=str
)
def test_other_pages_show_data_as_text(lab: dict[str, Any], page: str) -> None:
    at = _page(page)
    assert not at.exception, at.exception
    texts = markdown_texts(at)
    live = [(s, t) for t in texts for s in LIVE_MARKDOWN if s in t]
    assert live == [], f"{page}: Markdown from data: {live[:3]}"
