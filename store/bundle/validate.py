"""Reading a bundle someone else made, trusting nothing: the archive, the manifest, the SQLite
file, its schema and its rows.

Everything is checked on a private temporary copy opened read-only (member names and types, size
caps while streaming, the manifest's sha256, ``PRAGMA quick_check``, the exact schema, column
types, JSON, uids, references, row limits) before any lab database is touched.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import stat
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from store.bundle.format import (
    CHUNK_BYTES,
    DATA_NAME,
    DEFAULT_LIMITS,
    MANIFEST_NAME,
    REQUIRED_COLUMNS,
    TABLES,
    BundleError,
    BundleLimits,
    Manifest,
    manifest_from_bytes,
    reference_schema,
)
from store.bundle.rows import check_rows
from store.bundle.scratch import scratch_dir
from store.db import sqlite_uri

_SQLITE_MAGIC = b"SQLite format 3\x00"

Members = dict[str, zipfile.ZipInfo]


@contextmanager
def open_bundle(
    path: str | Path, limits: BundleLimits = DEFAULT_LIMITS
) -> Iterator[tuple[Manifest, sqlite3.Connection]]:
    """A fully validated bundle: its manifest and a read-only connection to a private copy
    (in a scratch folder that goes away on exit, on error and on SIGTERM)."""
    zf, members = _open_zip(Path(path), limits)
    conn: sqlite3.Connection | None = None
    with scratch_dir("import") as tmp:
        try:
            with zf:
                budget = Budget(members, limits)
                manifest = _load_manifest(zf, members, limits, budget)
                data = tmp / DATA_NAME
                _extract_data(zf, members[DATA_NAME], manifest, data, budget)
            conn = _check_sqlite(data, manifest, limits)
            yield manifest, conn
        finally:
            zf.close()
            if conn is not None:
                conn.close()


def verify_bundle(path: str | Path, limits: BundleLimits = DEFAULT_LIMITS) -> Manifest:
    """Every import check, without a target: BundleError or the manifest."""
    with open_bundle(path, limits) as (manifest, _conn):
        return manifest


def read_manifest(path: str | Path, limits: BundleLimits = DEFAULT_LIMITS) -> Manifest:
    """The manifest alone (for listings): archive checks and manifest checks, no SQLite."""
    zf, members = _open_zip(Path(path), limits)
    with zf:
        return _load_manifest(zf, members, limits)


# --- the archive -------------------------------------------------------------------------------


def _unsafe_member(name: str) -> bool:
    parts = name.replace("\\", "/").split("/")
    return (
        name.startswith(("/", "\\"))
        or "\\" in name
        or ".." in parts
        or bool(re.match(r"^[A-Za-z]:", name))
        or "\x00" in name
    )


def _open_zip(path: Path, limits: BundleLimits) -> tuple[zipfile.ZipFile, Members]:
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
        members: Members = {}
        for info in zf.infolist():
            _check_member(info, members)
            members[info.filename] = info
        for name in (MANIFEST_NAME, DATA_NAME):
            if name not in members:
                raise BundleError(f"{path.name} has no {name}: not a bundle", "truncated")
        return zf, members
    except BaseException:
        zf.close()
        raise


def _check_member(info: zipfile.ZipInfo, seen: Members) -> None:
    """One archive member: a safe name, one of the two expected, a plain unencrypted file."""
    name = info.filename
    if _unsafe_member(name) or _unsafe_member(info.orig_filename):
        raise BundleError(f"archive member {name!r} has an unsafe path", "unsafe_path")
    if name in seen:
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


class Budget:
    """What extraction may still inflate, counted while streaming: per member a small multiple of
    its compressed size (never past the lab's limit for it), and the same for the whole archive,
    so a 1 MB zip never writes a GiB, whatever its header or its manifest declares."""

    def __init__(self, members: Members, limits: BundleLimits) -> None:
        self.limits = limits
        packed = sum(info.compress_size for info in members.values())
        self.left = min(
            limits.max_data_bytes + limits.max_manifest_bytes,
            limits.max_inflate_ratio * packed + limits.inflate_allowance_bytes,
        )

    def cap(self, info: zipfile.ZipInfo, limit: int) -> int:
        """The most bytes this member may inflate to."""
        ratio, allowance = self.limits.max_inflate_ratio, self.limits.inflate_allowance_bytes
        return min(limit, ratio * info.compress_size + allowance, self.left)

    def refuse(self, info: zipfile.ZipInfo, size: int, cap: int) -> BundleError:
        return BundleError(
            f"{info.filename} is {size:,} bytes from {info.compress_size:,} compressed; the limit "
            f"is {cap:,} ({self.limits.max_inflate_ratio}x the compressed size plus "
            f"{self.limits.inflate_allowance_bytes:,}, within the lab's limits): refused",
            "too_large",
        )

    def take(self, n: int) -> None:
        self.left -= n


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, budget: Budget) -> bytes:
    cap = budget.cap(info, limit)
    if info.file_size > cap:
        raise budget.refuse(info, info.file_size, cap)
    try:
        with zf.open(info) as fh:
            data = fh.read(cap + 1)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
        raise BundleError(f"{info.filename} is corrupted ({exc})", "corrupted") from None
    if len(data) > cap:
        raise budget.refuse(info, len(data), cap)
    budget.take(len(data))
    return data


def _load_manifest(
    zf: zipfile.ZipFile, members: Members, limits: BundleLimits, budget: Budget | None = None
) -> Manifest:
    budget = budget or Budget(members, limits)
    raw = _read_member(zf, members[MANIFEST_NAME], limits.max_manifest_bytes, budget)
    return manifest_from_bytes(raw, limits)


def _extract_data(
    zf: zipfile.ZipFile, info: zipfile.ZipInfo, manifest: Manifest, dest: Path, budget: Budget
) -> None:
    """Stream bundle.sqlite out, never past the size the manifest declares nor the budget (a zip
    header can lie, and a member that inflates beyond them is a bomb or a forgery), and check its
    sha256. Refused before a byte is written when either claims more than the budget."""
    limit = budget.limits.max_data_bytes
    if info.file_size > limit or manifest.data_bytes > limit:
        raise BundleError(
            f"{DATA_NAME} is {max(info.file_size, manifest.data_bytes):,} bytes; "
            f"the limit is {limit:,}",
            "too_large",
        )
    declared = manifest.data_bytes
    if info.file_size != declared:
        raise BundleError(
            f"{DATA_NAME} is {info.file_size:,} bytes in the archive but the manifest says "
            f"{declared:,}: the bundle was changed or damaged",
            "checksum",
        )
    cap = budget.cap(info, limit)
    if declared > cap:
        raise budget.refuse(info, declared, cap)
    digest = hashlib.sha256()
    written = 0
    try:
        with zf.open(info) as src, open(dest, "wb") as out:
            while chunk := src.read(min(CHUNK_BYTES, declared - written + 1)):
                written += len(chunk)
                if written > declared:
                    raise BundleError(
                        f"{DATA_NAME} inflates past the {declared:,} bytes the manifest "
                        "declares: refused (a zip bomb or a changed bundle)",
                        "too_large",
                    )
                digest.update(chunk)
                out.write(chunk)
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise BundleError(f"{DATA_NAME} is corrupted ({exc})", "corrupted") from None
    budget.take(written)
    if written != manifest.data_bytes or digest.hexdigest() != manifest.data_sha256:
        raise BundleError(
            f"{DATA_NAME} does not match the manifest's checksum: the bundle was "
            "changed or damaged",
            "checksum",
        )


# --- the SQLite file ---------------------------------------------------------------------------


def _check_sqlite(path: Path, manifest: Manifest, limits: BundleLimits) -> sqlite3.Connection:
    """Open the private copy read-only and check it is exactly a lab bundle."""
    with open(path, "rb") as fh:
        header = fh.read(100)
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        raise BundleError(f"{DATA_NAME} is not a SQLite database", "corrupted")
    if header[18] != 1 or header[19] != 1:
        raise BundleError(f"{DATA_NAME} is in WAL mode: not written by a lab export", "corrupted")
    conn = sqlite3.connect(sqlite_uri(path, mode="ro", immutable="1"), uri=True)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        conn.execute("PRAGMA cell_size_check = ON")
        check = conn.execute("PRAGMA quick_check").fetchall()
        if check != [("ok",)]:
            why = "; ".join(" ".join(str(r[0]).split()) for r in check[:3])
            raise BundleError(f"{DATA_NAME} fails SQLite's quick_check: {why}", "corrupted")
        _check_schema(conn)
        check_rows(conn, manifest, limits)
    except sqlite3.DatabaseError as exc:
        conn.close()
        raise BundleError(f"{DATA_NAME} is corrupted ({exc})", "corrupted") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _check_schema(conn: sqlite3.Connection) -> None:
    """Only the lab's four tables and their indexes: no views, triggers or virtual tables."""
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
        _check_columns(conn, table, ref.columns[table])


def _check_columns(conn: sqlite3.Connection, table: str, expected: dict[str, str]) -> None:
    """Known columns, declared as the lab declares them, nothing generated or hidden."""
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
