"""Things every page needs: where the DB is and a fresh connection per rerun."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from store import open_db
from tuning.settings import default_db_path


def db_path() -> Path:
    return default_db_path()


def db() -> Any:
    """A new connection per rerun: each rerun runs in its own thread (sqlite check_same_thread)."""
    return open_db(db_path())
