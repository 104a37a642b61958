"""Things every page needs: where the DB is, the one connection of a page's render (opened on first
use, closed by app.py when the page is drawn), and text from data made safe for Streamlit's
Markdown."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store import open_db
from tuning.settings import default_db_path

# Streamlit's Material icons (drawn from its bundled font, so they render in any browser, unlike
# emoji, which need an emoji font): one name per page and for a warning.
ICONS = {
    "lab": ":material/science:",
    "new": ":material/add_circle:",
    "runs": ":material/table_rows:",
    "live": ":material/monitoring:",
    "compare": ":material/compare_arrows:",
    "history": ":material/history:",
    "search": ":material/travel_explore:",
    "settings": ":material/settings:",
    "warning": ":material/warning:",
    "ok": ":material/check_circle:",
}

# Characters that are Markdown syntax wherever they stand (code, emphasis, links and images,
# HTML and autolinks, tables, strikethrough, LaTeX, entities) and the escape character itself.
_MD_ANYWHERE = re.compile(r"([\\`*_\[\]<>|~$&])")
# Syntax only at the start of a block: headings, quotes, list items, ordered lists.
_MD_LINE_START = re.compile(r"^(\s*)(?:([#>+=-])|(\d+)([.)]))")
# GFM turns a bare URL or www. name into a link: break the scheme or the www.
_MD_AUTOLINK = re.compile(r"(?i)\b(https?|ftp|mailto)(:)|\b(www)(\.)")
# Line breaks would end a list item or open a new block; controls and bidi overrides hide text.
_MD_BLANK = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def lab_db_path() -> Path:
    return default_db_path()


# The connection of the render in progress: a list that holds it once opened (None: no render).
_RENDER: ContextVar[list[Database] | None] = ContextVar("render_db", default=None)


@contextmanager
def render_db() -> Iterator[None]:
    """One render of a page (app.py runs each page inside it): `db()` opens the render's connection
    on first use, and it is closed here when the page is drawn, stops (st.stop) or raises. A page
    that reads nothing opens nothing."""
    opened: list[Database] = []
    token = _RENDER.set(opened)
    try:
        yield
    finally:
        _RENDER.reset(token)
        for conn in opened:
            conn.conn.close()


def db() -> Database:
    """The connection of this render of the page, the same for every call (a page and the helpers
    it calls read through one). It does no other work: pages that show status call
    tuning.decide.reaper.reap_dead first, by name."""
    opened = _RENDER.get()
    if opened is None:
        raise RuntimeError(
            "ui.common.db() is for a page drawn through app.py (ui.common.render_db)"
        )
    if not opened:
        opened.append(open_db(lab_db_path()))
    return opened[0]


def md_escape(value: Any) -> str:
    """Text from data (a run value, a name, notes, a failure reason, a bundle's author) as it
    reads, inside anything Streamlit renders as Markdown: st.markdown, captions, headings,
    alerts, expander, widget and page-link labels, help and progress text. Syntax characters
    are backslash-escaped and line breaks become spaces, so `![x](http://host/x.png)` shows
    those characters rather than fetching an image. Plain text (`max-num-seqs = 16, 1,234.5`)
    comes out unchanged."""
    text = _MD_BLANK.sub(" ", str(value))
    text = _MD_ANYWHERE.sub(r"\\\1", text)
    text = _MD_AUTOLINK.sub(lambda m: f"{m[1]}\\:" if m[1] else f"{m[3]}\\.", text)
    return _MD_LINE_START.sub(
        lambda m: f"{m[1]}\\{m[2]}" if m[2] else f"{m[1]}{m[3]}\\{m[4]}", text
    )


def md_code(value: Any) -> str:
    """Text from data as an inline code span (paths, commands): fenced by more backticks than
    it holds, one line, so nothing in it can end the span."""
    text = _MD_BLANK.sub(" ", str(value))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {text} {fence}"


def pick_by_query(
    rows: Sequence[Mapping[str, Any]],
    query: str,
    title: str,
    key: str,
    label: Callable[[Mapping[str, Any]], str],
) -> dict[str, Any]:
    """A selector over `rows` (newest first) that opens on ?`query`=ID when it names one of them;
    the row picked."""
    import streamlit as st

    ids = [int(r["id"]) for r in rows]
    wanted = st.query_params.get(query)
    index = ids.index(int(wanted)) if wanted and wanted.isdigit() and int(wanted) in ids else 0
    by_id = {int(r["id"]): r for r in rows}
    picked = st.selectbox(title, ids, index=index, key=key, format_func=lambda i: label(by_id[i]))
    return dict(by_id[int(picked)])
