"""Bundles: selected runs or whole experiments of one lab as a single file a teammate can import.

This module is the format itself: names, limits, the manifest and what a bundle may contain.
Writing is in `store.bundle.export`, reading and checking in `store.bundle.validate`, merging
into a lab in `store.bundle.merge`.

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
"""

from __future__ import annotations

import functools
import re
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from sqlite_utils import Database

from core import json_depth
from store.schema_version import apply_migrations, schema_version

FORMAT = "vllm-tuning-lab-bundle"
FORMAT_VERSION = 1
SUFFIX = ".bundle.zip"
MANIFEST_NAME = "manifest.json"
DATA_NAME = "bundle.sqlite"
TABLES = ("experiments", "runs", "requests", "samples")
# Columns that only mean something on the machine that wrote them: emptied in every bundle.
LOCAL_ONLY: dict[str, dict[str, Any]] = {
    "experiments": {
        "runner_pid": None,
        "runner_start_time_s": None,
        "current_run_id": None,
        "cancel_requested": 0,
    },
    "runs": {"log_path": None, "server_pid": None, "server_start_time_s": None},
}
# What the manifest lists of each experiment and run (a listing needs no SQLite); an import
# checks each against its row (store.bundle.rows).
LISTED_EXPERIMENT_FIELDS = ("uid", "name", "param", "status", "author", "host")
LISTED_RUN_FIELDS = (
    "uid",
    "experiment_uid",
    "param",
    "value",
    "status",
    "author",
    "host",
    "started_at",
)
REQUIRED_COLUMNS = {
    "experiments": ("id", "uid"),
    "runs": ("id", "uid", "experiment_id"),
    "requests": ("run_id", "idx"),
    "samples": ("run_id", "t_s", "series", "value"),
}
UID_PATTERN = re.compile(r"^[0-9A-Za-z_-]{8,64}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
CHUNK_BYTES = 1 << 20


class BundleError(Exception):
    """A bundle cannot be made or is refused; `kind` names the check, the message says why."""

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class BundleLimits:
    """What an import accepts; tests shrink these to check the refusals."""

    max_bundle_bytes: int = 1 << 30  # the zip file as stored
    max_data_bytes: int = 4 << 30  # bundle.sqlite once decompressed
    # Extraction writes at most this many times a member's compressed size, plus the allowance
    # (per member, and once for the whole archive), whatever its header or the manifest claims:
    # lab bundles deflate 4-9x (the H200 examples), a zip bomb ~1000x.
    max_inflate_ratio: int = 32
    inflate_allowance_bytes: int = 8 << 20
    max_manifest_bytes: int = 8 << 20
    max_cell_bytes: int = 1 << 20  # one text cell (a note, a log tail, a JSON value)
    max_experiments: int = 10_000
    max_runs: int = 100_000
    max_requests: int = 50_000_000
    max_samples: int = 200_000_000

    def rows(self, table: str) -> int:
        return int(getattr(self, f"max_{table}"))


DEFAULT_LIMITS = BundleLimits()


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
    lab_uid: str | None = None  # the lab that made the bundle (None: an older lab's bundle)

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


# --- the known schema: the lab's migrations applied to an empty in-memory database ------------


@dataclass(frozen=True)
class Schema:
    columns: dict[str, dict[str, str]]  # table -> column -> declared type (upper case)
    create_sql: dict[str, str]
    indexes: dict[str, tuple[str, str, bool]]  # name -> (table, sql, unique)
    version: int  # migrations applied


@functools.lru_cache(maxsize=1)
def reference_schema() -> Schema:
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
        return Schema(columns, create_sql, indexes, schema_version(db))
    finally:
        conn.close()


def sqlite_columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[str]:
    return [r[1] for r in conn.execute(f'PRAGMA "{schema}".table_info("{table}")')]


# --- the manifest ------------------------------------------------------------------------------


def _text(value: Any, name: str, max_len: int = 500) -> str:
    if not isinstance(value, str) or len(value) > max_len or any(ord(ch) < 32 for ch in value):
        raise BundleError(f"manifest field {name!r} is not a short line of text", "manifest")
    return value


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_version(raw: dict[str, Any]) -> int:
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
    return version


def _check_counts(raw: dict[str, Any], limits: BundleLimits) -> dict[str, int]:
    counts = raw.get("counts")
    if (
        not isinstance(counts, dict)
        or set(counts) != set(TABLES)
        or not all(_is_count(v) for v in counts.values())
    ):
        raise BundleError("manifest counts are missing or not row counts", "manifest")
    for table in TABLES:
        if counts[table] > limits.rows(table):
            raise BundleError(
                f"bundle holds {counts[table]:,} {table} rows; the limit is {limits.rows(table):,}",
                "too_large",
            )
    return {t: int(counts[t]) for t in TABLES}


def _check_listing(raw: dict[str, Any], counts: dict[str, int]) -> tuple[list[Any], list[Any]]:
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
            or not UID_PATTERN.match(item["uid"])
        ):
            raise BundleError("manifest lists an entry without a valid uid", "manifest")
    return exps, runs


def parse_manifest(raw: Any, limits: BundleLimits = DEFAULT_LIMITS) -> Manifest:
    """A manifest dict -> Manifest, or BundleError saying which field is wrong."""
    if not isinstance(raw, dict):
        raise BundleError("manifest is not a JSON object", "manifest")
    version = _check_version(raw)
    uid = raw.get("bundle_uid")
    if not isinstance(uid, str) or not UID_PATTERN.match(uid):
        raise BundleError("manifest has no valid bundle_uid", "manifest")
    counts = _check_counts(raw, limits)
    files = raw.get("files")
    entry = files.get(DATA_NAME) if isinstance(files, dict) else None
    if (
        not isinstance(entry, dict)
        or not isinstance(entry.get("sha256"), str)
        or not _SHA256.match(entry["sha256"])
        or not isinstance(entry.get("bytes"), int)
    ):
        raise BundleError(f"manifest has no sha256 and size of {DATA_NAME}", "manifest")
    exps, runs = _check_listing(raw, counts)
    lab_version = raw.get("lab_schema_version", 0)
    lab = raw.get("lab_uid")
    if lab is not None and (not isinstance(lab, str) or not UID_PATTERN.match(lab)):
        raise BundleError("manifest field 'lab_uid' is not a valid uid", "manifest")
    note = raw.get("note")
    return Manifest(
        format_version=version,
        bundle_uid=uid,
        created_at=_text(raw.get("created_at"), "created_at", 64),
        author=_text(raw.get("author"), "author", 200),
        host=_text(raw.get("host"), "host", 200),
        lab_schema_version=lab_version if isinstance(lab_version, int) else 0,
        counts=counts,
        experiments=exps,
        runs=runs,
        data_sha256=entry["sha256"],
        data_bytes=int(entry["bytes"]),
        note=note if isinstance(note, str) else "",
        lab_uid=lab,
    )


def manifest_from_bytes(data: bytes, limits: BundleLimits = DEFAULT_LIMITS) -> Manifest:
    """The bytes of ``manifest.json`` -> Manifest (BundleError for bad JSON or a bad field)."""
    try:
        raw = json_depth.loads(data.decode("utf-8"))  # a RecursionError never gets this far
    except (UnicodeDecodeError, ValueError) as exc:
        raise BundleError(f"{MANIFEST_NAME} is not valid JSON ({exc})", "manifest") from None
    return parse_manifest(raw, limits)
