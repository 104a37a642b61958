"""Opening the lab's SQLite file: WAL so the runner writes while pages read, a busy timeout so
they wait for each other instead of failing, and migrations applied on every writable open."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlite_utils import Database

from store.schema import apply_migrations

BUSY_TIMEOUT_MS = 10_000


class StoreError(RuntimeError):
    """The DB cannot be opened or a row the caller named does not exist."""


def open_db(path: str | Path, *, readonly: bool = False) -> Database:
    """A fresh connection per caller (Streamlit runs each rerun in a new thread)."""
    target = Path(path)
    if readonly:
        if not target.exists():
            raise StoreError(f"no lab database at {target}")
        conn = sqlite3.connect(
            f"file:{target}?mode=ro",
            uri=True,
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return Database(conn)
    target.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(target), check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db = Database(conn)
    if db.journal_mode != "wal":
        db.enable_wal()
    db.execute("PRAGMA foreign_keys = ON")
    apply_migrations(db)
    return db


@contextmanager
def connect(path: str | Path, *, readonly: bool = False) -> Iterator[Database]:
    """`with connect(path) as db:` the one way to use the DB: the connection is closed on exit."""
    db = open_db(path, readonly=readonly)
    try:
        yield db
    finally:
        db.conn.close()
