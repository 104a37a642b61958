"""Text from the DB is shown as text on every page (AppTest): a run value that is a Markdown image
(`![x](http://127.0.0.1:9/x.png)`, which the browser would fetch) and notes, names, failure
reasons, health reasons with bold, HTML, links, colour directives and LaTeX reach every element
Streamlit draws as Markdown (markdown, captions, headings, alerts, expander and widget labels,
help, progress text, page links) only backslash-escaped."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.apptest import open_page
from tests.fakes.hostile import MD_IMAGE, MD_NOTES, seed_hostile_lab
from ui.common import md_escape

# What Streamlit would draw as something other than the characters themselves.
LIVE_MARKDOWN = (
    MD_IMAGE,
    "](http",
    "**bold**",
    "<img",
    "[link](javascript",
    ":red[red]",  # the data's colour directive (the page colours verdicts itself)
    "$x^2$",
)
# Elements whose text Streamlit shows verbatim (not Markdown).
LITERAL_TYPES = {"code", "text", "json", "arrow_data_frame", "dataframe", "latex", "exception"}
_ESCAPED = re.compile(r"\\.")


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "lab"))
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


def live_markdown(at: AppTest) -> list[tuple[str, str]]:
    """(syntax, text) for every piece of Markdown syntax from data left unescaped."""
    return [(s, t) for t in markdown_texts(at) for s in LIVE_MARKDOWN if s in _ESCAPED.sub("", t)]


def test_home_page_shows_data_as_text(lab: dict[str, Any]) -> None:
    at = open_page(None)
    assert live_markdown(at) == []
    joined = "\n".join(markdown_texts(at))
    assert md_escape(f"live {MD_NOTES}") in joined  # the running experiment's name
    assert md_escape(MD_IMAGE) in joined  # the latest runs' values


def test_runs_page_shows_data_as_text(lab: dict[str, Any]) -> None:
    at = open_page("app_pages/2_Runs.py")
    assert live_markdown(at) == []
    assert any(md_escape(MD_NOTES) in e.label for e in at.expander)  # the failure kind
    assert any(md_escape(MD_NOTES) in w.value for w in at.warning)  # a health reason


@pytest.mark.parametrize(
    "page",
    [
        "app_pages/1_New_experiment.py",
        "app_pages/3_Live.py",
        "app_pages/4_Compare.py",
        "app_pages/5_History.py",
    ],
)
def test_other_pages_show_data_as_text(lab: dict[str, Any], page: str) -> None:
    at = open_page(page)
    assert live_markdown(at) == []
