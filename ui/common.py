"""Things every page needs: where the DB is, a fresh connection per rerun, number formatting."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from store import open_db
from tuning.settings import default_db_path


def db_path() -> Path:
    return default_db_path()


def db() -> Any:
    """A new connection per rerun: each rerun runs in its own thread (sqlite check_same_thread)."""
    return open_db(db_path())


def fmt(value: Any, spec: str = "{:,.1f}", none: str = "—") -> str:
    if value is None:
        return none
    if isinstance(value, (int, float)):
        return spec.format(value)
    return str(value)


def fmt_bytes(value: Any) -> str:
    if not isinstance(value, (int, float)):
        return "—"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:,.2f} {unit}"
    return f"{value:,.0f} B"


def page_header(title: str, caption: str) -> None:
    st.title(title)
    st.caption(caption)
