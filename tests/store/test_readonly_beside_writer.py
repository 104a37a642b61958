"""A read-only open never opens the DB file from Python when SQLite can manage it itself: closing
any descriptor of the file drops every POSIX lock the process holds on it, the locks of its
read-write connections too, and a read-only connection beside a page's connection then read torn
pages while a runner wrote ("database disk image is malformed")."""

from __future__ import annotations

from pathlib import Path

import pytest

import store.db
from store import connect, open_db, queries


def test_readonly_open_beside_a_writer_does_not_touch_the_file(
    fresh_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_peeking(path: Path) -> bool:
        raise AssertionError(f"{path} opened from Python beside SQLite's own connections")

    keep = open_db(fresh_db)  # a page's read-write connection, still open
    monkeypatch.setattr(store.db, "_is_wal", no_peeking)
    with connect(fresh_db, readonly=True) as db:
        assert queries.list_experiments(db) == []
    keep.conn.close()
