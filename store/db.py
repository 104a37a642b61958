"""Opening the lab's SQLite file and writing to it.

WAL so the runner writes while pages read, a busy timeout so they wait for each other instead of
failing, and migrations applied on every writable open. Every write goes through
`write_transaction`: `BEGIN IMMEDIATE` takes the write lock before anything is read, so SQLite's
busy timeout applies (a deferred transaction that reads first and then writes gets SQLITE_BUSY at
once when another connection committed in between, and no timeout helps), retried with backoff
until `WRITE_WAIT_S`.

Read-only opens use SQLite's `mode=ro` and never change the file: the lab's example DB is kept in
rollback-journal mode so that looking at it leaves nothing beside it (a WAL-mode file gets its
`-wal`/`-shm` companions from any reader, which is SQLite's own rule); a WAL file whose folder we
cannot write and that no writer has open (no `-wal` beside it) is opened `immutable=1`.
A DB written by a newer lab (schema steps this lab does not know) is refused before anything is
read or written, by readers and writers alike; an SQLite file of something else (tables, none of
the lab's) is refused rather than given the lab's tables; and a damaged file is refused with what
to do about it. A read-only file and a full disk are not damage: `refusal` names each as what it
is (moving such a file aside, the damaged-DB advice, helps nothing and loses nothing only by luck).
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from sqlite_utils import Database

from store.schema_version import (
    apply_migrations,
    is_lab_schema,
    pending_migrations,
    unknown_migrations,
)

BUSY_TIMEOUT_MS = 10_000
# How long a writer keeps trying to get the write lock before it gives up (each try waits up to
# the busy timeout, then backs off).
WRITE_WAIT_S = 120.0
_SQLITE_BUSY, _SQLITE_LOCKED, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL = 5, 6, 8, 10, 13
# An I/O error with less than this free on the DB's disk is a full disk (SQLite reports a failed
# write as SQLITE_IOERR on some file systems).
NEARLY_FULL_BYTES = 1 << 20


class StoreError(RuntimeError):
    """The DB cannot be opened or a row the caller named does not exist."""


class NewerSchemaError(StoreError):
    """The DB was written by a newer lab: refused, nothing written."""


class ForeignDatabaseError(StoreError):
    """An SQLite file of something else (it has tables, none of them the lab's): refused."""


class DamagedDatabaseError(StoreError):
    """The file is not a SQLite database, or SQLite finds it malformed."""


class ReadOnlyDatabaseError(StoreError):
    """The DB (its file, its folder or its file system) cannot be written: not damage."""


class DiskFullError(StoreError):
    """The disk holding the DB is full (or SQLite hit a size limit): not damage."""


def damaged_message(path: str | Path, exc: BaseException) -> str:
    """What to say about a DB SQLite cannot read, and how to recover."""
    p = Path(path)
    return (
        f"the lab database {p} cannot be read ({exc}). It is damaged or not a lab database. "
        f"Nothing was changed. To recover: move it aside (mv {p} {p}.damaged) and the lab "
        f"starts a fresh one; to save what is readable, run "
        f"`sqlite3 {p}.damaged .recover | sqlite3 {p}`"
    )


def locked_message(path: str | Path, exc: BaseException, holders: list[str] | None = None) -> str:
    """What to say when another connection kept the DB locked past the wait: the file is sound,
    so never the damaged-DB advice (moving a locked DB aside loses what its writer still adds)."""
    who = f" It is open in: {'; '.join(holders)}." if holders else ""
    return (
        f"the lab database {Path(path)} is locked by another writer ({exc}); the file is not "
        f"damaged and nothing was changed.{who} Run the command again when that one has "
        "finished; do not move the file aside."
    )


def _code(exc: BaseException) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def free_bytes(path: str | Path) -> int | None:
    """Free bytes on the file system holding `path` (its nearest existing folder)."""
    folder = Path(path).resolve().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def is_read_only(exc: BaseException) -> bool:
    """SQLITE_READONLY (`attempt to write a readonly database`), whatever the extended code."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = _code(exc)
    return code == _SQLITE_READONLY if code is not None else "readonly" in str(exc).lower()


def is_full(exc: BaseException, path: str | Path) -> bool:
    """SQLITE_FULL (`database or disk is full`), or an I/O error on a disk with nothing left."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = _code(exc)
    if code == _SQLITE_FULL or (code is None and "is full" in str(exc).lower()):
        return True
    free = free_bytes(path)
    return code == _SQLITE_IOERR and free is not None and free < NEARLY_FULL_BYTES


def read_only_message(path: str | Path, exc: BaseException) -> str:
    p = Path(path)
    if not os.access(p, os.W_OK):
        where = "the file is"
    elif not os.access(p.parent, os.W_OK):
        where = "its folder is"
    else:
        where = "the file or its file system is"
    return (
        f"the lab database {p} is read-only ({where} read-only: {exc}); it is not damaged and "
        f"nothing was changed: make it writable (chmod u+w {p}), or give --db a writable copy "
        f"(cp {p} elsewhere.db); read-only commands (runs, compare, report) still work"
    )


def full_message(path: str | Path, exc: BaseException) -> str:
    p = Path(path)
    free = free_bytes(p)
    if free is not None and free < NEARLY_FULL_BYTES:
        return (
            f"the disk holding {p} is full: {free:,} bytes free ({exc}); the DB is not damaged "
            "and what it held is kept: free some space and run the command again (do not move "
            "the file aside)"
        )
    left = f"{free:,} bytes are free on its disk" if free is not None else "its disk"
    return (
        f"SQLite could not grow {p} ({exc}) though {left}: a quota or a size limit; the DB is "
        "not damaged: lift the limit and run the command again"
    )


def db_refusal(path: str | Path, exc: BaseException) -> StoreError:
    """An SQLite error on `path` as the lab's refusal: read-only, full, or damaged."""
    if is_read_only(exc):
        return ReadOnlyDatabaseError(read_only_message(path, exc))
    if is_full(exc, path):
        return DiskFullError(full_message(path, exc))
    return DamagedDatabaseError(damaged_message(path, exc))


def is_busy(exc: BaseException) -> bool:
    """SQLITE_BUSY or SQLITE_LOCKED (`database is locked`), whatever the extended code."""
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _backoff(attempt: int) -> float:
    return min(1.0, 0.02 * (2**attempt)) * (0.5 + random.random())


def _begin_immediate(conn: sqlite3.Connection) -> None:
    deadline = time.monotonic() + WRITE_WAIT_S
    attempt = 0
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                if is_busy(exc):
                    raise StoreError(
                        f"the lab database stayed locked by another writer for "
                        f"{WRITE_WAIT_S:.0f} s: {exc}"
                    ) from exc
                raise
        time.sleep(_backoff(attempt))
        attempt += 1


def _commit(conn: sqlite3.Connection) -> None:
    """COMMIT, retried while readers hold a rollback-journal DB (in WAL it never waits)."""
    deadline = time.monotonic() + WRITE_WAIT_S
    attempt = 0
    while True:
        try:
            conn.execute("COMMIT")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() > deadline:
                raise
        time.sleep(_backoff(attempt))
        attempt += 1


@contextmanager
def write_transaction(db: Database) -> Iterator[Database]:
    """`with write_transaction(db):` the one way the lab writes: BEGIN IMMEDIATE (retried with
    backoff while another writer holds the lock), COMMIT on success, ROLLBACK on any exception.

    sqlite-utils' own helpers (insert, update, atomic) nest inside as savepoints. Inside an open
    transaction of this connection it is a savepoint too. Do slow work (scrubbing, validating)
    before entering: the lock is held for the whole block.
    """
    conn = db.conn
    if conn.in_transaction:
        with db.atomic():
            yield db
        return
    _begin_immediate(conn)
    try:
        yield db
    except BaseException:
        _rollback(conn)
        raise
    try:
        _commit(conn)
    except BaseException:
        _rollback(conn)
        raise


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.rollback()


def sqlite_uri(path: Path, **params: str) -> str:
    """A `file:` URI for sqlite3 (read-only and immutable opens need one)."""
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.resolve()))}" + (f"?{query}" if query else "")


def _is_wal(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18] == 2


def readonly_uri(path: Path) -> str:
    """`mode=ro`; `immutable=1` only for a WAL file no writer has open whose folder we cannot
    write (SQLite could not create the -shm it needs, and nothing can change under us).

    The header is read (`_is_wal`) only when the rest already holds: opening and closing the file
    from Python drops every POSIX lock this process holds on it, the locks of its read-write
    SQLite connections included, so a read-only open beside a page's connection while a runner
    wrote read torn pages ("database disk image is malformed")."""
    if not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists() and _is_wal(path):
        return sqlite_uri(path, mode="ro", immutable="1")
    return sqlite_uri(path, mode="ro")


def _connect(uri_or_path: str, uri: bool) -> sqlite3.Connection:
    conn = sqlite3.connect(
        uri_or_path, uri=uri, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    return conn


def _probe(conn: sqlite3.Connection, target: Path) -> None:
    """Read the schema once: a file that is not SQLite, or a damaged one, fails here."""
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as exc:
        if is_busy(exc):
            raise
        conn.close()
        raise db_refusal(target, exc) from None


def _refuse_foreign_or_newer(db: Database, target: Path) -> None:
    """Before anything is written: a file of another program, or of a newer lab, is refused."""
    if not is_lab_schema(db):
        db.conn.close()
        raise ForeignDatabaseError(
            f"{target} is an SQLite file of something else (tables of its own, none of the lab's "
            "schema steps): refused, nothing was written; give --db a lab database or a new file"
        )
    newer = unknown_migrations(db)
    if newer:
        db.conn.close()
        raise NewerSchemaError(
            f"{target} was written by a newer version of the lab (schema step(s) "
            f"{', '.join(newer)} unknown here): update the lab (git pull) to open it; "
            "nothing was written"
        )


def open_db(path: str | Path, *, readonly: bool = False) -> Database:
    """A fresh connection per caller (Streamlit runs each rerun in a new thread)."""
    target = Path(path)
    if readonly:
        if not target.exists():
            raise StoreError(f"no lab database at {target}")
        conn = _connect(readonly_uri(target), uri=True)
        _probe(conn, target)
        ro = Database(conn)
        _checked(ro, target, _refuse_foreign_or_newer)
        return ro
    target.parent.mkdir(parents=True, exist_ok=True)
    conn = _connect(str(target), uri=False)
    _probe(conn, target)
    db = Database(conn)
    try:
        _refuse_foreign_or_newer(db, target)
        if db.journal_mode != "wal":
            db.enable_wal()
        db.execute("PRAGMA foreign_keys = ON")
        # WAL's recommended level: never corrupts; a power cut may lose the last commits, and a
        # commit costs no fsync (the runner's heartbeat and the pages' notes commit often).
        db.execute("PRAGMA synchronous = NORMAL")
        if pending_migrations(db):
            with write_transaction(db):  # one opener migrates; the others wait, then see it done
                apply_migrations(db)
    except sqlite3.DatabaseError as exc:
        conn.close()
        if is_busy(exc):
            raise
        raise db_refusal(target, exc) from None
    return db


def _checked(db: Database, target: Path, check: Callable[[Database, Path], None]) -> None:
    """Run a check that reads the schema; SQLite's own errors become a damaged-DB refusal."""
    try:
        check(db, target)
    except sqlite3.DatabaseError as exc:
        db.conn.close()
        if is_busy(exc):
            raise
        raise db_refusal(target, exc) from None


@contextmanager
def connect(path: str | Path, *, readonly: bool = False) -> Iterator[Database]:
    """`with connect(path) as db:` the one way to use the DB: the connection is closed on exit."""
    db = open_db(path, readonly=readonly)
    try:
        yield db
    finally:
        db.conn.close()
