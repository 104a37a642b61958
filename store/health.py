"""A lab database looked at, never changed: is it SQLite at all, does `quick_check` pass, which
schema it carries against this code's, and its journal mode. `tuning-lab doctor` reads it."""

from __future__ import annotations

import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store.schema_version import known_migrations, schema_version, unknown_migrations


@dataclass
class DbHealth:
    """What one look at a DB file found; `error` says why it could not be read at all."""

    path: str
    exists: bool
    error: str | None = None
    quick_check: list[str] = field(default_factory=list)  # ["ok"] when healthy
    schema_version: int | None = None  # migrations applied to the file
    code_schema_version: int = 0  # migrations this code knows
    unknown_migrations: list[str] = field(default_factory=list)  # from a newer lab
    journal_mode: str | None = None

    @property
    def newer(self) -> bool:
        return bool(self.unknown_migrations)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "newer": self.newer}


def _wal_header(target: Path) -> bool:
    """The file's header says WAL (bytes 18-19 are 2), whatever an immutable open reports."""
    try:
        with target.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header.startswith(b"SQLite format 3\x00") and header[18:19] == b"\x02"


def _readonly_uri(target: Path) -> str:
    """`mode=ro`; for a WAL file nobody has open (no `-wal` beside it) also `immutable=1`, since
    a WAL reader would otherwise create `-wal` and `-shm` files beside a file it only looks at."""
    uri = f"file:{target}?mode=ro"
    if _wal_header(target) and not Path(f"{target}-wal").exists():
        uri += "&immutable=1"
    return uri


def inspect_db(path: str | Path, timeout_s: float = 5.0) -> DbHealth:
    """Open `path` read-only (SQLite's `mode=ro`: no WAL switch, no migration, no write)."""
    target = Path(path)
    health = DbHealth(str(target), target.exists(), code_schema_version=len(known_migrations()))
    if not health.exists:
        return health
    try:
        conn = sqlite3.connect(_readonly_uri(target), uri=True, timeout=timeout_s)
    except sqlite3.Error as exc:
        health.error = f"{type(exc).__name__}: {exc}"
        return health
    try:
        health.quick_check = [str(r[0]) for r in conn.execute("PRAGMA quick_check").fetchall()]
        mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        health.journal_mode = "wal" if _wal_header(target) else mode
        db = Database(conn)
        health.schema_version = schema_version(db)
        health.unknown_migrations = unknown_migrations(db)
    except sqlite3.Error as exc:
        health.error = f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return health
