"""Driving the dashboard with Streamlit's AppTest: open a page the way a browser does (through
app.py, which sets up navigation and each render's connection), and read what it shows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parents[1] / "app.py")
TEXT_ELEMENTS = (
    "title",
    "subheader",
    "markdown",
    "caption",
    "success",
    "info",
    "warning",
    "error",
    "code",
)


def open_page(
    page: str | None,
    setup: Callable[[AppTest], None] | None = None,
    home_first: bool = False,
) -> AppTest:
    """`page` (the home page when None) opened from a link, as a browser does: app.py's
    navigation runs with that page (with `setup` applied first: query params, session state).
    `home_first`: the home page is drawn first and the page reached from it (a render more; only
    for a test about the renders themselves)."""
    at = AppTest.from_file(APP, default_timeout=60)
    if page is None or home_first:
        at.run()
        assert not at.exception, at.exception
    if page:
        if setup:
            setup(at)
        at.switch_page(page).run()
        assert not at.exception, at.exception
    return at


def with_query(name: str, value: object) -> Callable[[AppTest], None]:
    """A `setup` for open_page: the page is opened from a link with ?name=value."""
    return lambda at: at.query_params.__setitem__(name, str(value))


def frames(at: AppTest) -> str:
    """Every dataframe on the page, as CSV."""
    return "\n".join(df.value.to_csv() for df in at.dataframe)


def page_text(at: AppTest) -> str:
    """Everything the page says in words, and its tables."""
    parts = [getattr(e, "value", "") for kind in TEXT_ELEMENTS for e in getattr(at, kind)]
    return "\n".join(map(str, parts)) + "\n" + frames(at)


def frame_with(at: AppTest, column: str) -> Any:
    """The first dataframe with this column (AppTest exposes no key for read-only frames)."""
    for df in at.dataframe:
        if column in df.value.columns:
            return df.value
    raise AssertionError(f"no dataframe with column {column!r}")
