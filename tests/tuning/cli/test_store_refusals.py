"""Issue 11, item 10: the CLI and a lab DB it should not change. A damaged DB gets a plain
message with how to recover (no traceback); a DB written by a newer lab is refused with nothing
written; read-only commands (runs, compare, report; chart shares compare's path) leave a DB
byte-identical with no -wal/-shm beside it, the committed H200 example included."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, snapshot
from store.db import NewerSchemaError
from tests.checks import db_fingerprint
from tests.factories import seed_clean_lab
from tuning.cli.main import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "h200" / "lab-h200.db.xz"
Cli = Callable[..., CompletedProcess[str]]


def _damaged(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / f"{kind}.db"
    if kind == "not-sqlite":
        path.write_bytes(b"this is a spreadsheet, not a lab\n" * 200)
        return path
    seed_clean_lab(path, values=(2,), repeats=1)
    data = bytearray(path.read_bytes())
    page = 4096
    for p in range(2, len(data) // page):  # every page but the first: the schema survives
        data[p * page : p * page + 64] = b"\xa5" * 64
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("kind", ["not-sqlite", "garbled-pages"])
@pytest.mark.parametrize(
    "command",
    [["runs"], ["compare", "--experiment", "1"], ["experiment", "--param", "x", "--repeats", "1"]],
)
def test_a_damaged_db_gets_a_plain_message_with_the_way_out(
    kind: str, command: list[str], tmp_path: Path, tuning_cli: Cli
) -> None:
    path = _damaged(tmp_path, kind)
    before = _sha(path)  # a WAL-mode file may get empty -wal/-shm from a reader: SQLite's rule
    args = [*command, "--db", str(path)]
    if command[0] == "experiment":
        args += ["--values", "1", "--base-url", "http://127.0.0.1:9/v1"]
        args[2] = "concurrency"
    out = tuning_cli(args, tmp_path / "home", timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "cannot be read" in out.stderr and ".recover" in out.stderr
    assert _sha(path) == before


def _from_a_newer_lab(tmp_path: Path) -> Path:
    path = tmp_path / "newer.db"
    seed_clean_lab(path, values=(2,), repeats=1)
    conn = sqlite3.connect(path)
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
        "VALUES ('vllm-tuning-lab', 'm999_from_the_future', '2030-01-01')"
    )
    conn.commit()
    conn.close()
    return path


def test_a_db_from_a_newer_lab_is_refused_and_nothing_is_written(
    tmp_path: Path, tuning_cli: Cli
) -> None:
    path = _from_a_newer_lab(tmp_path)
    before = db_fingerprint(path)
    with pytest.raises(NewerSchemaError, match="m999_from_the_future"), connect(path):
        pass
    out = tuning_cli(
        [
            "experiment",
            "--repeats",
            "1",
            "--param",
            "concurrency",
            "--values",
            "1",
            "--db",
            str(path),
        ]
        + ["--base-url", "http://127.0.0.1:9/v1"],
        tmp_path / "home",
        timeout=120,
    )
    assert out.returncode == 1 and "newer version of the lab" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert db_fingerprint(path) == before


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _companions(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.glob(path.name + "-*"))


def test_read_only_commands_leave_a_copy_of_the_example_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each command is the CLI's main in this process (the same code a subprocess runs, without
    three interpreter start-ups): whatever it opened is closed by the time it returns."""
    copy = tmp_path / "lab-h200.db"
    shutil.copy(snapshot.expanded(EXAMPLE), copy)
    sha = _sha(copy)
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path / "home"))
    for args in (
        ["runs", "--json"],
        ["compare", "--experiment", "1"],
        ["report", "--experiment", "1", "--out", str(tmp_path / "r.html")],
    ):
        code = main([*args, "--db", str(copy)])
        assert code == 0, capsys.readouterr().err
        assert _sha(copy) == sha, args
        assert _companions(copy) == [], args


def test_the_committed_example_is_kept_in_rollback_mode_and_compare_leaves_it_as_it_was(
    tmp_path: Path, tuning_cli: Cli
) -> None:
    """A WAL-mode file gets -wal/-shm from any reader (SQLite's rule); the example is committed
    in journal_mode=DELETE (and xz-compressed, opened as its cached expansion), so the README's
    own command changes neither the committed file nor the copy the lab reads."""
    cache = tmp_path / "cache"
    sha = _sha(EXAMPLE)
    out = tuning_cli(
        ["compare", "--db", str(EXAMPLE), "--experiment", "1"],
        tmp_path / "home",
        timeout=120,
        env={"XDG_CACHE_HOME": str(cache)},
    )
    assert out.returncode == 0, out.stderr
    assert _sha(EXAMPLE) == sha
    (opened,) = cache.rglob("*.db")
    assert opened.read_bytes()[18:20] == b"\x01\x01"  # file format 1: rollback journal
    assert _sha(opened) == _sha(snapshot.expanded(EXAMPLE)) and _companions(opened) == []


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "--json"],
        ["compare", "--experiment", "1"],
        ["export", "--experiment", "1", "--out", "OUT"],
        ["report", "--experiment", "1", "--out", "OUT.html"],
    ],
)
def test_readers_refuse_a_db_from_a_newer_lab_too(
    command: list[str], tmp_path: Path, tuning_cli: Cli
) -> None:
    """Issue 22: `runs`, `compare` and `export` read a newer lab's DB silently (its new columns
    or meanings unknown here); now readers refuse it as writers do, in one line."""
    path = _from_a_newer_lab(tmp_path)
    before = _sha(path)  # a reader of a WAL-mode file may leave an empty -wal: SQLite's rule
    args = [a.replace("OUT", str(tmp_path / "out.bundle.zip")) for a in command]
    newer = pytest.raises(NewerSchemaError, match="m999_from_the_future")
    with newer, connect(path, readonly=True):
        pass
    out = tuning_cli([*args, "--db", str(path)], tmp_path / "home", timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "newer version of the lab" in lines[0] and str(path) in lines[0]
    assert out.stdout == "" and not list(tmp_path.glob("out*"))
    assert _sha(path) == before


def _foreign(tmp_path: Path) -> Path:
    path = tmp_path / "notes.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
    conn.execute("INSERT INTO notes (text) VALUES ('my own data')")
    conn.commit()
    conn.close()
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["runs"],
        ["reap"],
        ["compare", "--experiment", "1"],
        ["workload", "list"],
        ["experiment", "--repeats", "1", "--param", "concurrency", "--values", "1"]
        + ["--base-url", "http://127.0.0.1:9/v1"],
    ],
)
def test_an_unrelated_sqlite_file_is_refused_not_given_the_lab_s_tables(
    command: list[str], tmp_path: Path, tuning_cli: Cli
) -> None:
    """Issue 22: `--db` at another program's SQLite file added the lab's tables to it. Now it is
    refused in one line naming the file, and the file keeps its bytes and its mtime; an empty or
    missing file is still a new lab."""
    path = _foreign(tmp_path)
    sha, mtime = _sha(path), path.stat().st_mtime_ns
    out = tuning_cli([*command, "--db", str(path)], tmp_path / "home", timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "none of the lab's" in lines[0], lines
    assert _sha(path) == sha and path.stat().st_mtime_ns == mtime
    assert _companions(path) == []
    with sqlite3.connect(path) as conn:
        assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["notes"]


def test_an_empty_or_missing_file_is_still_a_new_lab(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    for path in (empty, tmp_path / "missing.db"):
        with connect(path) as db:
            assert "experiments" in db.table_names()


HOLD = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("UPDATE experiments SET notes = 'held' WHERE 0")
print("holding", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("command", [["runs"], ["reap"]])
def test_a_locked_db_is_called_locked_not_damaged(
    command: list[str], tmp_path: Path, tuning_cli: Cli
) -> None:
    """Fresh-clone run 2 of 0bcb7f4: a resume whose store met `database is locked` was refused with
    "cannot be read ... It is damaged ... move it aside": advice that loses the rows a live writer
    still adds. A lock is a lock: named as one, with the process that holds the file, no recovery
    advice, nothing changed."""
    path = tmp_path / "lab.db"
    seed_clean_lab(path, values=(2,), repeats=1)
    before = db_fingerprint(path)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "holding"
        out = tuning_cli([*command, "--db", str(path)], tmp_path / "home", timeout=120)
    finally:
        holder.communicate("", timeout=30)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr, out.stderr
    assert "is locked by another writer" in out.stderr and "not damaged" in out.stderr
    assert f"pid {holder.pid}" in out.stderr, out.stderr
    assert "move it aside" not in out.stderr and ".recover" not in out.stderr
    assert db_fingerprint(path) == before
