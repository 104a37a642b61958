"""Issue 41 case 12: a read-only DB and a full disk were called "cannot be read ... It is damaged
... move it aside": advice for a file that is sound. Each is named as what it is now, with what
to do, from SQLite's own errors (a write on a read-only connection; SQLITE_FULL from a DB that
may not grow), through the CLI's one-line refusal."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest

from store import db as store_db
from tests.checks import db_fingerprint
from tests.factories import seed_clean_lab
from tuning.cli.main import main as cli_main

Connect = Callable[[str, bool], sqlite3.Connection]


@pytest.fixture
def lab(tmp_path: Path, lab_home: Path) -> Path:
    path = tmp_path / "lab.db"
    seed_clean_lab(path, values=(2,), repeats=1)
    return path


def _opened_as(monkeypatch: pytest.MonkeyPatch, lab: Path, setup: str) -> None:
    """Every connection the lab opens to `lab` as SQLite opens a file it cannot write (`ro`),
    or with `setup` run first (a page limit: SQLite's own SQLITE_FULL when the DB must grow)."""
    real: Connect = store_db._connect

    def connect(uri_or_path: str, uri: bool) -> sqlite3.Connection:
        if setup == "ro" and not uri:
            return real(store_db.sqlite_uri(Path(uri_or_path), mode="ro"), True)
        conn = real(uri_or_path, uri)
        if setup != "ro":
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    monkeypatch.setattr(store_db, "_connect", connect)


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("refused:"), err[-3000:]
    assert "damaged" not in lines[0].replace("not damaged", "") and "move it aside" not in lines[0]
    return lines[0]


def test_a_read_only_db_is_called_read_only(
    lab: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with store_db.connect(lab) as db:  # waiting for a runner: a cancel must write
        db.execute("update experiments set status = 'queued', runner_pid = null where id = 1")
    before = db_fingerprint(lab)
    _opened_as(monkeypatch, lab, "ro")
    assert cli_main(["cancel", "--experiment", "1", "--db", str(lab)]) == 1
    line = _one_line(capsys)
    assert f"the lab database {lab} is read-only" in line and "chmod u+w" in line, line
    assert db_fingerprint(lab)["db"] == before["db"]  # a WAL reader may leave an empty -wal


def test_a_full_disk_is_called_full_with_the_bytes_free(
    lab: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "bob.db"
    info = seed_clean_lab(src, "bob", "box-b", values=(4,), repeats=1, seed=3)
    from store.bundle import export_bundle

    bundle = tmp_path / "bob.bundle.zip"
    export_bundle(src, bundle, run_ids=info["run_ids"], author="bob", host="box-b")
    _opened_as(monkeypatch, lab, "full")  # the DB may not grow: SQLITE_FULL, as on a full disk
    monkeypatch.setattr(
        shutil, "disk_usage", lambda _: SimpleNamespace(total=1 << 30, used=0, free=4096)
    )
    assert cli_main(["import", str(bundle), "--db", str(lab)]) == 1
    line = _one_line(capsys)
    assert f"the disk holding {lab} is full: 4,096 bytes free" in line, line
    assert "database or disk is full" in line  # SQLite's own words, quoted


def test_sqlite_full_with_room_on_the_disk_says_a_limit_not_damage(lab: Path) -> None:
    conn = sqlite3.connect(lab)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(sqlite3.OperationalError) as full:
        conn.execute("CREATE TABLE filler (x BLOB)")
        conn.execute("INSERT INTO filler VALUES (zeroblob(1000000))")
    conn.close()
    err = store_db.db_refusal(lab, full.value)
    assert isinstance(err, store_db.DiskFullError)
    assert "a quota or a size limit" in str(err) and "not damaged" in str(err)


def test_a_file_that_is_not_sqlite_is_still_called_damaged(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"not a database at all\n" * 300)
    with pytest.raises(store_db.DamagedDatabaseError, match="move it aside"):
        store_db.open_db(path)
