"""Bundles: selected runs or whole experiments of one lab as a single file a teammate can import.

Format (``FORMAT_VERSION`` 1): a zip archive with exactly two members.

- ``manifest.json``: format name and version, bundle uid, who made it and where (author, host),
  when, the lab schema version, row counts, the uids inside (with param/value/status per run) and
  the sha256 and size of ``bundle.sqlite``.
- ``bundle.sqlite``: a fresh SQLite file with the lab's four tables (experiments, runs, requests,
  samples), only the selected rows, secrets scrubbed and local-only columns emptied (log path,
  pids).

Why a zip around a SQLite file rather than a bare SQLite file: the manifest can be read (a team
folder listing) without handing a teammate's file to SQLite at all; the checksum covers the exact
SQLite bytes, so a truncated or bit-flipped bundle is refused before SQLite parses anything; the
per-request ITL arrays (JSON text) deflate several times; and unzipping gives a plain SQLite file
that Datasette or the sqlite3 shell open as is.

Export reads the source inside one read transaction (SQLite's snapshot: a runner writing at the
same time is either wholly in or wholly out) and writes only the selected rows into a new file with
``INSERT ... SELECT``; the live WAL database is never copied. Import validates everything on a
private temporary copy opened read-only (checksums, ``PRAGMA quick_check``, exact schema, column
types, row limits, references) before it opens the target, then merges by uid in one transaction:
a refused bundle leaves the target byte-for-byte as it was, and importing a bundle twice adds
nothing the second time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat
import tempfile
import uuid
import zipfile
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlite_utils import Database

from core.redact import (
    REDACTED,
    env_secrets,
    scrub_cell,
    scrub_row,
    scrub_text,
)
from store.schema import JSON_COLUMNS, apply_migrations, schema_version

FORMAT = "vllm-tuning-lab-bundle"
FORMAT_VERSION = 1
SUFFIX = ".bundle.zip"
MANIFEST_NAME = "manifest.json"
DATA_NAME = "bundle.sqlite"
TABLES = ("experiments", "runs", "requests", "samples")
REDACTED = "[redacted]"
ACTIVE_STATUSES = ("queued", "running", "pending")
# Columns that only mean something on the machine that wrote them: emptied in every bundle.
LOCAL_ONLY = {
    "experiments": {"runner_pid": None, "current_run_id": None, "cancel_requested": 0},
    "runs": {"log_path": None, "server_pid": None},
}
REQUIRED_COLUMNS = {
    "experiments": ("id", "uid"),
    "runs": ("id", "uid", "experiment_id"),
    "requests": ("run_id", "idx"),
    "samples": ("run_id", "t_s", "series", "value"),
}
_UID = re.compile(r"^[0-9A-Za-z_-]{8,64}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SQLITE_MAGIC = b"SQLite format 3\x00"
_CHUNK = 1 << 20


class BundleError(Exception):
    """A bundle cannot be made or is refused; `kind` names the check, the message says why."""

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class Limits:
    """What an import accepts; tests shrink these to check the refusals."""

    max_bundle_bytes: int = 1 << 30  # the zip file as stored
    max_data_bytes: int = 4 << 30  # bundle.sqlite once decompressed
    max_manifest_bytes: int = 8 << 20
    max_experiments: int = 10_000
    max_runs: int = 100_000
    max_requests: int = 50_000_000
    max_samples: int = 200_000_000

    def rows(self, table: str) -> int:
        return int(getattr(self, f"max_{table}"))


DEFAULT_LIMITS = Limits()


@dataclass
class Manifest:
    """The validated manifest of a bundle."""

    format_version: int
    bundle_uid: str
    created_at: str
    author: str
    host: str
    lab_schema_version: int
    counts: dict[str, int]
    experiments: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    data_sha256: str
    data_bytes: int
    note: str = ""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def origin(self) -> str:
        """What imported rows carry in their `origin` column."""
        return f"bundle:{self.bundle_uid} from {self.author}@{self.host}"

    @property
    def run_uids(self) -> list[str]:
        return [str(r["uid"]) for r in self.runs]

    @property
    def experiment_uids(self) -> list[str]:
        return [str(e["uid"]) for e in self.experiments]


@dataclass
class ImportResult:
    """What an import changed: local ids of the added rows and what was already there."""

    manifest: Manifest
    experiments_added: list[int] = field(default_factory=list)
    runs_added: list[int] = field(default_factory=list)
    experiments_known: int = 0
    runs_known: int = 0
    requests_added: int = 0
    samples_added: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.experiments_added or self.runs_added)

    def describe(self) -> str:
        m = self.manifest
        return (
            f"{len(self.runs_added)} run(s) and {len(self.experiments_added)} experiment(s) "
            f"added from {m.author}@{m.host} ({m.created_at}); {self.runs_known} run(s) were "
            f"already here"
        )


# --------------------------------------------------------------------------------------------
# The known schema: the lab's migrations applied to an empty in-memory database
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Schema:
    columns: dict[str, dict[str, str]]  # table -> column -> declared type (upper case)
    create_sql: dict[str, str]
    indexes: dict[str, tuple[str, str, bool]]  # name -> (table, sql, unique)
    version: int  # migrations applied


@functools.lru_cache(maxsize=1)
def reference_schema() -> _Schema:
    """What a bundle may contain, derived from the migrations so it follows the lab's schema."""
    conn = sqlite3.connect(":memory:")
    try:
        db = Database(conn)
        apply_migrations(db)
        columns = {
            t: {r[1]: str(r[2]).upper() for r in conn.execute(f'PRAGMA table_info("{t}")')}
            for t in TABLES
        }
        create_sql = {
            r[0]: r[1]
            for r in conn.execute("select name, sql from sqlite_master where type = 'table'")
            if r[0] in TABLES
        }
        indexes = {}
        for name, tbl, sql in conn.execute(
            "select name, tbl_name, sql from sqlite_master where type = 'index'"
        ):
            if tbl in TABLES and sql:
                indexes[name] = (tbl, sql, "UNIQUE INDEX" in sql.upper())
        return _Schema(columns, create_sql, indexes, schema_version(db))
    finally:
        conn.close()


def lab_schema_version() -> int:
    return reference_schema().version


# --------------------------------------------------------------------------------------------
# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------


def _utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _resolve_identity(author: str | None, host: str | None) -> tuple[str, str]:
    if author and host:
        return author, host
    from tuning.settings import load_settings

    settings = load_settings()
    return author or settings.resolved_author(), host or settings.resolved_host()


def _one_line(text: str, limit: int = 200) -> str:
    """Author and host as the manifest holds them: one short printable line."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())[:limit]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(path.resolve()))}" + (f"?{query}" if query else "")


def _columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA "{schema}".table_info("{table}")')]


def export_bundle(
    db_path: str | Path,
    out_path: str | Path,
    *,
    run_ids: Iterable[int] = (),
    experiment_ids: Iterable[int] = (),
    author: str | None = None,
    host: str | None = None,
    note: str = "",
    bundle_uid: str | None = None,
) -> Manifest:
    """Write the named runs (and every run of the named experiments) as one bundle file.

    Parent experiments of selected runs come along (their configuration and workload). Runs
    that are still going are refused: a bundle is a finished result.
    """
    src = Path(db_path)
    out = Path(out_path)
    if not src.is_file():
        raise BundleError(f"no lab database at {src}", "not_found")
    runs = sorted({int(i) for i in run_ids})
    exps = sorted({int(i) for i in experiment_ids})
    if not runs and not exps:
        raise BundleError("nothing to export: name runs or experiments", "empty")
    author, host = (_one_line(x) or "unknown" for x in _resolve_identity(author, host))
    uid = bundle_uid or uuid.uuid4().hex
    if not _UID.match(uid):
        raise BundleError(f"bad bundle uid {uid!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    secrets = env_secrets()
    schema = reference_schema()
    with tempfile.TemporaryDirectory(prefix="bundle-export-") as tmp:
        data = Path(tmp) / DATA_NAME
        conn = sqlite3.connect(_uri(data), uri=True)
        try:
            for table in TABLES:
                conn.execute(schema.create_sql[table])
            for name, (table, sql, unique) in schema.indexes.items():
                if unique:
                    conn.execute(sql)
            conn.execute("ATTACH DATABASE ? AS src", [_uri(src, mode="ro")])
            conn.execute("CREATE TEMP TABLE sel_runs (id INTEGER PRIMARY KEY)")
            conn.execute("CREATE TEMP TABLE sel_exps (id INTEGER PRIMARY KEY)")
            conn.execute("BEGIN")  # one read transaction over src: a consistent snapshot
            _select(conn, runs, exps)
            counts = _copy_rows(conn)
            _scrub_bundle(conn, secrets)
            conn.commit()
            conn.execute("DETACH DATABASE src")
            manifest_rows = _manifest_rows(conn)
        except sqlite3.DatabaseError as exc:
            conn.rollback()
            raise BundleError(f"cannot read {src}: {exc}", "source") from None
        finally:
            conn.close()
        size = data.stat().st_size
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "bundle_uid": uid,
            "created_at": _utc_now(),
            "author": author,
            "host": host,
            "note": scrub_text(" ".join(note.split())[:500], secrets),
            "lab_schema_version": lab_schema_version(),
            "counts": counts,
            "experiments": manifest_rows[0],
            "runs": manifest_rows[1],
            "files": {DATA_NAME: {"sha256": _sha256_file(data), "bytes": size}},
            "scrubbed": {
                "emptied_columns": sorted(
                    f"{t}.{c}" for t, cols in LOCAL_ONLY.items() for c in cols
                ),
                "redaction": REDACTED,
            },
        }
        partial = out.with_name(f".{out.name}.{uid[:8]}.partial")
        try:
            with zipfile.ZipFile(
                partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6
            ) as zf:
                zf.writestr(MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=True))
                zf.write(data, DATA_NAME)
            os.replace(partial, out)  # readers of a shared folder never see half a file
        finally:
            partial.unlink(missing_ok=True)
    return parse_manifest(manifest)


def _select(conn: sqlite3.Connection, runs: list[int], exps: list[int]) -> None:
    """Fill sel_runs/sel_exps; refuse ids that do not exist and runs that are not finished."""
    conn.executemany("INSERT OR IGNORE INTO sel_exps VALUES (?)", [(i,) for i in exps])
    conn.executemany("INSERT OR IGNORE INTO sel_runs VALUES (?)", [(i,) for i in runs])
    missing = [
        r[0]
        for r in conn.execute(
            "select id from sel_exps where id not in (select id from src.experiments)"
        )
    ]
    if missing:
        raise BundleError(f"no experiment {', '.join(map(str, missing))}", "not_found")
    missing = [
        r[0]
        for r in conn.execute("select id from sel_runs where id not in (select id from src.runs)")
    ]
    if missing:
        raise BundleError(f"no run {', '.join(map(str, missing))}", "not_found")
    conn.execute(
        "INSERT OR IGNORE INTO sel_runs SELECT id FROM src.runs WHERE experiment_id IN "
        "(SELECT id FROM sel_exps)"
    )
    conn.execute(
        "INSERT OR IGNORE INTO sel_exps SELECT DISTINCT experiment_id FROM src.runs "
        "WHERE id IN (SELECT id FROM sel_runs) AND experiment_id IS NOT NULL "
        "AND experiment_id IN (SELECT id FROM src.experiments)"
    )
    marks = ",".join("?" * len(ACTIVE_STATUSES))
    busy = [
        f"experiment {r[0]}"
        for r in conn.execute(
            f"select id from src.experiments where id in (select id from sel_exps) and status in "
            f"({marks})",
            ACTIVE_STATUSES,
        )
    ]
    busy += [
        f"run {r[0]}"
        for r in conn.execute(
            f"select id from src.runs where id in (select id from sel_runs) and status in ({marks})",
            ACTIVE_STATUSES,
        )
    ]
    if busy:
        raise BundleError(f"{', '.join(busy)} still running: export when it has finished", "active")


def _copy_rows(conn: sqlite3.Connection) -> dict[str, int]:
    counts = {}
    where = {
        "experiments": "id IN (SELECT id FROM sel_exps)",
        "runs": "id IN (SELECT id FROM sel_runs)",
        "requests": "run_id IN (SELECT id FROM sel_runs)",
        "samples": "run_id IN (SELECT id FROM sel_runs)",
    }
    for table in TABLES:
        have = set(_columns(conn, table, "src"))
        cols = [c for c in _columns(conn, table) if c in have]
        names = ", ".join(f'"{c}"' for c in cols)
        cur = conn.execute(
            f'INSERT INTO main."{table}" ({names}) SELECT {names} FROM '
            f'src."{table}" WHERE {where[table]} ORDER BY rowid'
        )
        counts[table] = int(cur.rowcount)
    return counts


def _scrub_bundle(conn: sqlite3.Connection, secrets: Sequence[str]) -> None:
    """Local-only columns emptied; every text cell of experiments and runs scrubbed; the few
    distinct error texts and sample labels too."""
    for table in ("experiments", "runs"):
        blank = LOCAL_ONLY[table]
        conn.execute(
            f'UPDATE "{table}" SET ' + ", ".join(f'"{c}" = ?' for c in blank), list(blank.values())
        )
        cols = _columns(conn, table)
        text_cols = [c for c in cols if reference_schema().columns[table].get(c) == "TEXT"]
        for row in conn.execute(f'SELECT id, {", ".join(text_cols)} FROM "{table}"').fetchall():
            changed = {c: scrub_cell(c, v, secrets) for c, v in zip(text_cols, row[1:])}
            changed = {c: v for (c, v), old in zip(changed.items(), row[1:]) if v != old}
            if changed:
                conn.execute(
                    f'UPDATE "{table}" SET '
                    + ", ".join(f'"{c}" = ?' for c in changed)
                    + " WHERE id = ?",
                    [*changed.values(), row[0]],
                )
    for table, col in (("requests", "error"), ("samples", "label")):
        for (value,) in conn.execute(
            f'SELECT DISTINCT "{col}" FROM "{table}" WHERE "{col}" IS NOT NULL'
        ).fetchall():
            clean = scrub_text(value, secrets)
            if clean != value:
                conn.execute(f'UPDATE "{table}" SET "{col}" = ? WHERE "{col}" = ?', [clean, value])


def _manifest_rows(conn: sqlite3.Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    conn.row_factory = sqlite3.Row
    try:
        exps = [
            {
                "uid": r["uid"],
                "name": r["name"],
                "param": r["param"],
                "status": r["status"],
                "author": r["author"],
                "host": r["host"],
            }
            for r in conn.execute("select * from experiments order by id")
        ]
        runs = [
            {
                "uid": r["uid"],
                "experiment_uid": r["experiment_uid"],
                "param": r["param"],
                "value": r["value"],
                "status": r["status"],
                "author": r["author"],
                "host": r["host"],
                "started_at": r["started_at"],
            }
            for r in conn.execute(
                "select r.*, e.uid as experiment_uid from runs r left join "
                "experiments e on e.id = r.experiment_id order by r.id"
            )
        ]
    finally:
        conn.row_factory = None
    return exps, runs


# --------------------------------------------------------------------------------------------
# Reading and validating
# --------------------------------------------------------------------------------------------


def _unsafe_member(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return (
        name.startswith(("/", "\\"))
        or "\\" in name
        or ".." in parts
        or bool(re.match(r"^[A-Za-z]:", name))
        or "\x00" in name
    )


def _open_zip(path: Path, limits: Limits) -> tuple[zipfile.ZipFile, dict[str, zipfile.ZipInfo]]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise BundleError(f"cannot read {path.name}: {exc.strerror or exc}", "not_found") from None
    if not path.is_file():
        raise BundleError(f"{path.name} is not a file", "not_found")
    if size > limits.max_bundle_bytes:
        raise BundleError(
            f"{path.name} is {size:,} bytes; the limit is {limits.max_bundle_bytes:,}", "too_large"
        )
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError) as exc:
        raise BundleError(
            f"{path.name} is not a bundle, or it is truncated ({exc})", "truncated"
        ) from None
    try:
        members: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            name = info.filename
            if _unsafe_member(name) or _unsafe_member(info.orig_filename):
                raise BundleError(f"archive member {name!r} has an unsafe path", "unsafe_path")
            if name in members:
                raise BundleError(f"archive member {name!r} appears twice", "unsafe_path")
            if name not in (MANIFEST_NAME, DATA_NAME):
                raise BundleError(
                    f"unexpected archive member {name!r} (a bundle holds only "
                    f"{MANIFEST_NAME} and {DATA_NAME})",
                    "unexpected_member",
                )
            mode = (info.external_attr >> 16) & 0xFFFF
            if stat.S_IFMT(mode) and not stat.S_ISREG(mode) or info.is_dir():
                raise BundleError(f"archive member {name!r} is not a plain file", "unsafe_path")
            if info.flag_bits & 0x1:
                raise BundleError(f"archive member {name!r} is encrypted", "unexpected_member")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise BundleError(
                    f"archive member {name!r} uses an unsupported compression", "unexpected_member"
                )
            members[name] = info
        for name in (MANIFEST_NAME, DATA_NAME):
            if name not in members:
                raise BundleError(f"{path.name} has no {name}: not a bundle", "truncated")
        return zf, members
    except BaseException:
        zf.close()
        raise


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    if info.file_size > limit:
        raise BundleError(
            f"{info.filename} is {info.file_size:,} bytes; the limit is {limit:,}", "too_large"
        )
    try:
        with zf.open(info) as fh:
            data = fh.read(limit + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise BundleError(f"{info.filename} is corrupted ({exc})", "corrupted") from None
    if len(data) > limit:
        raise BundleError(f"{info.filename} is over {limit:,} bytes", "too_large")
    return data


def _text(value: Any, name: str, max_len: int = 500) -> str:
    if not isinstance(value, str) or len(value) > max_len or any(ord(ch) < 32 for ch in value):
        raise BundleError(f"manifest field {name!r} is not a short line of text", "manifest")
    return value


def parse_manifest(raw: Any, limits: Limits = DEFAULT_LIMITS) -> Manifest:
    """A manifest dict -> Manifest, or BundleError saying which field is wrong."""
    if not isinstance(raw, dict):
        raise BundleError("manifest is not a JSON object", "manifest")
    if raw.get("format") != FORMAT:
        raise BundleError(f"not a lab bundle (format {raw.get('format')!r})", "manifest")
    version = raw.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(f"bad format_version {version!r}", "manifest")
    if version > FORMAT_VERSION:
        raise BundleError(
            f"bundle format {version} is newer than this lab reads "
            f"({FORMAT_VERSION}): update the lab to import it",
            "newer_version",
        )
    uid = raw.get("bundle_uid")
    if not isinstance(uid, str) or not _UID.match(uid):
        raise BundleError("manifest has no valid bundle_uid", "manifest")
    counts = raw.get("counts")
    if (
        not isinstance(counts, dict)
        or set(counts) != set(TABLES)
        or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in counts.values()
        )
    ):
        raise BundleError("manifest counts are missing or not row counts", "manifest")
    for table in TABLES:
        if counts[table] > limits.rows(table):
            raise BundleError(
                f"bundle holds {counts[table]:,} {table} rows; the limit is {limits.rows(table):,}",
                "too_large",
            )
    files = raw.get("files")
    entry = files.get(DATA_NAME) if isinstance(files, dict) else None
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("sha256"), str)
        or not _SHA256.match(entry["sha256"])
        or not isinstance(entry.get("bytes"), int)
    ):
        raise BundleError(f"manifest has no sha256 and size of {DATA_NAME}", "manifest")
    exps, runs = raw.get("experiments"), raw.get("runs")
    if (
        not isinstance(exps, list)
        or not isinstance(runs, list)
        or len(exps) != counts["experiments"]
        or len(runs) != counts["runs"]
    ):
        raise BundleError("manifest lists do not match its counts", "manifest")
    for item in [*exps, *runs]:
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("uid"), str)
            or not _UID.match(item["uid"])
        ):
            raise BundleError("manifest lists an entry without a valid uid", "manifest")
    schema_version = raw.get("lab_schema_version", 0)
    return Manifest(
        format_version=version,
        bundle_uid=uid,
        created_at=_text(raw.get("created_at"), "created_at", 64),
        author=_text(raw.get("author"), "author", 200),
        host=_text(raw.get("host"), "host", 200),
        lab_schema_version=schema_version if isinstance(schema_version, int) else 0,
        counts={t: int(counts[t]) for t in TABLES},
        experiments=exps,
        runs=runs,
        data_sha256=entry["sha256"],
        data_bytes=int(entry["bytes"]),
        note=raw.get("note") if isinstance(raw.get("note"), str) else "",
        raw=raw,
    )


def read_manifest(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Manifest:
    """The manifest alone (for listings): archive checks and manifest checks, no SQLite."""
    zf, members = _open_zip(Path(path), limits)
    with zf:
        return _load_manifest(zf, members, limits)


def _load_manifest(
    zf: zipfile.ZipFile, members: dict[str, zipfile.ZipInfo], limits: Limits
) -> Manifest:
    raw = _read_member(zf, members[MANIFEST_NAME], limits.max_manifest_bytes)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{MANIFEST_NAME} is not valid JSON ({exc})", "manifest") from None
    return parse_manifest(data, limits)


def _extract_data(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, manifest: Manifest, dest: Path, limits: Limits
) -> None:
    """Stream bundle.sqlite out with a byte cap (a declared size can lie) and check its sha256."""
    limit = limits.max_data_bytes
    if info.file_size > limit or manifest.data_bytes > limit:
        raise BundleError(
            f"{DATA_NAME} is {max(info.file_size, manifest.data_bytes):,} bytes; "
            f"the limit is {limit:,}",
            "too_large",
        )
    digest = hashlib.sha256()
    written = 0
    try:
        with zf.open(info) as src, open(dest, "wb") as out:
            while True:
                chunk = src.read(_CHUNK)
                if not chunk:
                    break
                written += len(chunk)
                if written > limit:
                    raise BundleError(f"{DATA_NAME} is over {limit:,} bytes", "too_large")
                digest.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise BundleError(f"{DATA_NAME} is corrupted ({exc})", "corrupted") from None
    if written != manifest.data_bytes or digest.hexdigest() != manifest.data_sha256:
        raise BundleError(
            f"{DATA_NAME} does not match the manifest's checksum: the bundle was "
            "changed or damaged",
            "checksum",
        )


def _check_sqlite(path: Path, manifest: Manifest, limits: Limits) -> sqlite3.Connection:
    """Open the private copy read-only and check it is exactly a lab bundle."""
    with open(path, "rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise BundleError(f"{DATA_NAME} is not a SQLite database", "corrupted")
    if header[18] != 1 or header[19] != 1:
        raise BundleError(f"{DATA_NAME} is in WAL mode: not written by a lab export", "corrupted")
    conn = sqlite3.connect(_uri(path, mode="ro", immutable="1"), uri=True)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA cell_size_check = ON")
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            why = "; ".join(" ".join(str(r[0]).split()) for r in check[:3])
            raise BundleError(f"{DATA_NAME} fails SQLite's quick_check: {why}", "corrupted")
        _check_schema(conn)
        _check_rows(conn, manifest, limits)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise BundleError(f"{DATA_NAME} is corrupted ({exc})", "corrupted") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _check_schema(conn: sqlite3.Connection) -> None:
    ref = reference_schema()
    seen: set[str] = set()
    for kind, name, tbl, sql in conn.execute(
        "select type, name, tbl_name, sql from sqlite_master order by rowid"
    ).fetchall():
        if kind in ("view", "trigger"):
            raise BundleError(
                f"bundle has a {kind} {name!r}: refused (a bundle holds only the "
                "lab's four tables)",
                "schema",
            )
        if kind == "table":
            if name not in TABLES:
                raise BundleError(f"bundle has an unexpected table {name!r}", "schema")
            if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
                raise BundleError(f"bundle table {name!r} is a virtual table", "schema")
            seen.add(name)
        elif kind == "index":
            auto = name.startswith(f"sqlite_autoindex_{tbl}_") and sql is None
            if not auto and (name not in ref.indexes or ref.indexes[name][0] != tbl):
                raise BundleError(f"bundle has an unexpected index {name!r} on {tbl!r}", "schema")
        else:
            raise BundleError(f"bundle has an unexpected {kind} {name!r}", "schema")
    missing = [t for t in TABLES if t not in seen]
    if missing:
        raise BundleError(f"bundle lacks the table(s) {', '.join(missing)}", "schema")
    for table in TABLES:
        expected = ref.columns[table]
        cols = conn.execute(f'PRAGMA table_xinfo("{table}")').fetchall()
        names = {c[1] for c in cols}
        for _cid, name, ctype, _notnull, _default, pk, hidden in cols:
            if hidden:
                raise BundleError(f"{table}.{name} is a generated or hidden column", "schema")
            if name not in expected:
                raise BundleError(f"bundle has an unknown column {table}.{name}", "schema")
            if str(ctype).upper() != expected[name]:
                raise BundleError(
                    f"column {table}.{name} is declared {ctype or 'untyped'}; "
                    f"expected {expected[name]}",
                    "types",
                )
            if name == "id" and pk != 1:
                raise BundleError(f"{table}.id is not the primary key", "schema")
        lacking = [c for c in REQUIRED_COLUMNS[table] if c not in names]
        if lacking:
            raise BundleError(f"bundle table {table} lacks {', '.join(lacking)}", "schema")


_ALLOWED_TYPES = {
    "INTEGER": ("null", "integer"),
    "REAL": ("null", "real", "integer"),
    "TEXT": ("null", "text"),
}


def _check_rows(conn: sqlite3.Connection, manifest: Manifest, limits: Limits) -> None:
    ref = reference_schema()
    for table in TABLES:
        n = int(conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0])
        if n > limits.rows(table):
            raise BundleError(
                f"bundle holds {n:,} {table} rows; the limit is {limits.rows(table):,}", "too_large"
            )
        if n != manifest.counts[table]:
            raise BundleError(
                f"manifest says {manifest.counts[table]} {table} rows, {DATA_NAME} holds {n}",
                "manifest",
            )
        cols = _columns(conn, table)
        probes = []
        for col in cols:
            allowed = ", ".join(f"'{t}'" for t in _ALLOWED_TYPES[ref.columns[table][col]])
            probes.append(f'sum(typeof("{col}") NOT IN ({allowed}))')
            if col in JSON_COLUMNS:
                probes.append(
                    f'sum("{col}" IS NOT NULL AND typeof("{col}") = \'text\' AND '
                    f'NOT json_valid("{col}"))'
                )
        labels = [
            (c, kind)
            for c in cols
            for kind in (("type", "json") if c in JSON_COLUMNS else ("type",))
        ]
        sums = conn.execute(f'SELECT {", ".join(probes)} FROM "{table}"').fetchone()
        for (col, kind), bad in zip(labels, sums):
            if bad:
                what = (
                    "value(s) of the wrong type (expected " + ref.columns[table][col] + ")"
                    if kind == "type"
                    else "value(s) that are not valid JSON"
                )
                raise BundleError(f"{table}.{col} holds {bad} {what}", "types")
    for table in ("experiments", "runs"):
        bad = conn.execute(
            f'SELECT uid FROM "{table}" WHERE uid IS NULL OR length(uid) < 8 OR '
            f"length(uid) > 64 OR uid GLOB '*[^0-9A-Za-z_-]*' LIMIT 1"
        ).fetchone()
        if bad:
            raise BundleError(f"{table} has an invalid uid {bad[0]!r}", "types")
        dup = conn.execute(
            f'SELECT uid FROM "{table}" GROUP BY uid HAVING count(*) > 1 LIMIT 1'
        ).fetchone()
        if dup:
            raise BundleError(f"{table} uid {dup[0]!r} appears twice", "invalid")
        marks = ",".join("?" * len(ACTIVE_STATUSES))
        busy = conn.execute(
            f'SELECT uid FROM "{table}" WHERE status IN ({marks}) LIMIT 1', ACTIVE_STATUSES
        ).fetchone()
        if busy:
            raise BundleError(f"bundle holds an unfinished {table[:-1]} ({busy[0]})", "invalid")
    if conn.execute(
        "SELECT 1 FROM runs WHERE experiment_id IS NOT NULL AND experiment_id NOT IN "
        "(SELECT id FROM experiments) LIMIT 1"
    ).fetchone():
        raise BundleError("a run points to an experiment the bundle does not hold", "invalid")
    for table in ("requests", "samples"):
        if conn.execute(
            f'SELECT 1 FROM "{table}" WHERE run_id IS NULL OR run_id NOT IN '
            "(SELECT id FROM runs) LIMIT 1"
        ).fetchone():
            raise BundleError(f"{table} rows point to a run the bundle does not hold", "invalid")
    if conn.execute(
        "SELECT 1 FROM requests GROUP BY run_id, idx HAVING count(*) > 1 LIMIT 1"
    ).fetchone():
        raise BundleError("requests has a duplicate (run_id, idx)", "invalid")
    exps = {r[0] for r in conn.execute("SELECT uid FROM experiments")}
    runs = {r[0] for r in conn.execute("SELECT uid FROM runs")}
    if exps != set(manifest.experiment_uids) or runs != set(manifest.run_uids):
        raise BundleError(f"manifest's uids do not match {DATA_NAME}", "manifest")


@contextmanager
def open_bundle(
    path: str | Path, limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[Manifest, sqlite3.Connection]]:
    """A fully validated bundle: its manifest and a read-only connection to a private copy."""
    zf, members = _open_zip(Path(path), limits)
    tmp = Path(tempfile.mkdtemp(prefix="bundle-import-"))
    conn: sqlite3.Connection | None = None
    try:
        with zf:
            manifest = _load_manifest(zf, members, limits)
            data = tmp / DATA_NAME
            _extract_data(zf, members[DATA_NAME], manifest, data, limits)
        conn = _check_sqlite(data, manifest, limits)
        yield manifest, conn
    finally:
        if conn is not None:
            conn.close()
        shutil.rmtree(tmp, ignore_errors=True)


def verify_bundle(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Manifest:
    """Every import check, without a target: BundleError or the manifest."""
    with open_bundle(path, limits) as (manifest, _conn):
        return manifest


# --------------------------------------------------------------------------------------------
# Import
# --------------------------------------------------------------------------------------------


def present_uids(db: Database | sqlite3.Connection, table: str, uids: Iterable[str]) -> set[str]:
    """Which of these uids the lab DB already holds (for 'already imported')."""
    conn = db.conn if isinstance(db, Database) else db
    wanted = list(dict.fromkeys(uids))
    out: set[str] = set()
    for i in range(0, len(wanted), 500):
        part = wanted[i : i + 500]
        out |= {
            r[0]
            for r in conn.execute(
                f'SELECT uid FROM "{table}" WHERE uid IN ({",".join("?" * len(part))})', part
            )
        }
    return out


def import_bundle(
    db_path: str | Path, bundle_path: str | Path, limits: Limits = DEFAULT_LIMITS
) -> ImportResult:
    """Validate, then merge by uid in one transaction; BundleError leaves the target untouched.

    New runs get new local ids, their experiment_id is remapped, and requests and samples follow
    them; rows whose uid is already here are left alone. Imported rows carry `origin`.
    """
    with open_bundle(bundle_path, limits) as (manifest, src):
        from store.db import open_db  # the target is opened only once the bundle has passed

        db = open_db(db_path)
        try:
            return _merge(db.conn, src, manifest)
        finally:
            db.conn.close()


def _insert(conn: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> int:
    cols = list(row)
    names = ", ".join(f'"{c}"' for c in cols)
    cur = conn.execute(
        f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(cols))})',
        [row[c] for c in cols],
    )
    return int(cur.lastrowid or 0)


def _dict_rows(conn: sqlite3.Connection, table: str, cols: list[str]) -> list[dict[str, Any]]:
    names = ", ".join(f'"{c}"' for c in cols)
    return [
        dict(zip(cols, row)) for row in conn.execute(f'SELECT {names} FROM "{table}" ORDER BY id')
    ]


def _merge(conn: sqlite3.Connection, src: sqlite3.Connection, manifest: Manifest) -> ImportResult:
    result = ImportResult(manifest=manifest)
    secrets = env_secrets()
    ref = reference_schema()
    cols = {}
    for table in TABLES:  # what both sides know; a target with more columns leaves them empty
        here = set(_columns(conn, table))
        cols[table] = [c for c in _columns(src, table) if c in here and c in ref.columns[table]]
    origin = manifest.origin
    conn.execute("BEGIN IMMEDIATE")
    try:
        exp_map: dict[int, int] = {}
        for rec in _dict_rows(src, "experiments", cols["experiments"]):
            local = conn.execute(
                "SELECT id FROM experiments WHERE uid = ?", [rec["uid"]]
            ).fetchone()
            if local:
                exp_map[int(rec["id"])] = int(local[0])
                result.experiments_known += 1
                continue
            bundle_id = int(rec.pop("id"))
            rec = scrub_row(rec, secrets)
            rec.update(LOCAL_ONLY["experiments"])
            rec.update(origin=origin, hidden=0)
            new_id = _insert(conn, "experiments", rec)
            exp_map[bundle_id] = new_id
            result.experiments_added.append(new_id)
        run_map: dict[int, int] = {}
        for rec in _dict_rows(src, "runs", cols["runs"]):
            if conn.execute("SELECT 1 FROM runs WHERE uid = ?", [rec["uid"]]).fetchone():
                result.runs_known += 1
                continue
            bundle_id = int(rec.pop("id"))
            rec = scrub_row(rec, secrets)
            rec.update(LOCAL_ONLY["runs"])
            exp = rec.get("experiment_id")
            rec["experiment_id"] = exp_map.get(int(exp)) if exp is not None else None
            rec.update(origin=origin, hidden=0)
            new_id = _insert(conn, "runs", rec)
            run_map[bundle_id] = new_id
            result.runs_added.append(new_id)
        if run_map:
            result.requests_added = _copy_children(
                conn, src, "requests", cols["requests"], run_map, "error", secrets
            )
            result.samples_added = _copy_children(
                conn, src, "samples", cols["samples"], run_map, "label", secrets
            )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return result


def _copy_children(
    conn: sqlite3.Connection,
    src: sqlite3.Connection,
    table: str,
    cols: list[str],
    run_map: Mapping[int, int],
    text_col: str,
    secrets: Sequence[str],
) -> int:
    pos = cols.index("run_id")
    tpos = cols.index(text_col) if text_col in cols else -1
    names = ", ".join(f'"{c}"' for c in cols)
    sql = f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(cols))})'
    count = 0
    batch: list[list[Any]] = []
    for row in src.execute(f'SELECT {names} FROM "{table}" ORDER BY rowid'):
        new_run = run_map.get(row[pos])
        if new_run is None:
            continue
        values = list(row)
        values[pos] = new_run
        if tpos >= 0 and isinstance(values[tpos], str):
            values[tpos] = scrub_text(values[tpos], secrets)
        batch.append(values)
        if len(batch) >= 5000:
            conn.executemany(sql, batch)
            count += len(batch)
            batch = []
    if batch:
        conn.executemany(sql, batch)
        count += len(batch)
    return count
