"""Writing a bundle: the selected rows of a lab DB, scrubbed, in a zip with their manifest.

Export reads the source inside one read transaction (SQLite's snapshot: a runner writing at the
same time is either wholly in or wholly out) and writes only the selected rows into a new file
with ``INSERT ... SELECT``; the live WAL database is never copied. The zip appears under its name
in one rename, so readers of a shared folder never see half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import uuid
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.redact import REDACTED, env_secrets, scrub_cell, scrub_text
from core.status import ACTIVE
from store.bundle.format import (
    CHUNK_BYTES,
    DATA_NAME,
    FORMAT,
    FORMAT_VERSION,
    LISTED_EXPERIMENT_FIELDS,
    LISTED_RUN_FIELDS,
    LOCAL_ONLY,
    MANIFEST_NAME,
    TABLES,
    UID_PATTERN,
    BundleError,
    Manifest,
    parse_manifest,
    reference_schema,
    sqlite_columns,
)
from store.bundle.scratch import scratch_dir
from store.db import StoreError, connect, readonly_uri, sqlite_uri
from store.schema import lab_uid

PROMPT_TEXT = "requests.prompt_text"  # emptied unless the bundle is made with include_prompts


def export_bundle(
    db_path: str | Path,
    out_path: str | Path,
    *,
    author: str,
    host: str,
    run_ids: Iterable[int] = (),
    experiment_ids: Iterable[int] = (),
    note: str = "",
    bundle_uid: str | None = None,
    include_prompts: bool = False,
) -> Manifest:
    """Write the named runs (and every run of the named experiments) as one bundle file.

    Parent experiments of selected runs come along (their configuration and workload). Runs
    that are still going are refused: a bundle is a finished result. `author` and `host` say
    who made it and where (the caller's settings; the store does not read them). Request rows
    keep their prompts' lengths and content hashes; the prompt text only with `include_prompts`.
    """
    src = Path(db_path)
    out = Path(out_path)
    if not src.is_file():
        raise BundleError(f"no lab database at {src}", "not_found")
    runs = sorted({int(i) for i in run_ids})
    exps = sorted({int(i) for i in experiment_ids})
    if not runs and not exps:
        raise BundleError("nothing to export: name runs or experiments", "empty")
    uid = bundle_uid or uuid.uuid4().hex
    if not UID_PATTERN.match(uid):
        raise BundleError(f"bad bundle uid {uid!r}")
    lab = _source_lab(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    secrets = env_secrets()
    with scratch_dir("export") as tmp:
        data = tmp / DATA_NAME
        counts, (exp_rows, run_rows) = _write_data(
            src, data, runs, exps, secrets, include_prompts, lab
        )
        manifest = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "bundle_uid": uid,
            "created_at": now_iso("seconds"),
            "author": _one_line(author) or "unknown",
            "host": _one_line(host) or "unknown",
            "note": scrub_text(" ".join(note.split())[:500], secrets),
            "lab_schema_version": reference_schema().version,
            "lab_uid": lab,
            "counts": counts,
            "experiments": exp_rows,
            "runs": run_rows,
            "files": {DATA_NAME: {"sha256": _sha256_file(data), "bytes": data.stat().st_size}},
            "scrubbed": {
                "emptied_columns": sorted(
                    [f"{t}.{c}" for t, cols in LOCAL_ONLY.items() for c in cols]
                    + ([] if include_prompts else [PROMPT_TEXT])
                ),
                "redaction": REDACTED,
            },
        }
        _write_zip(out, manifest, data, uid)
    return parse_manifest(manifest)


def _source_lab(src: Path) -> str | None:
    """The source lab's uid (None for a DB no lab of this version has written yet); a damaged
    DB, one of a newer lab or an SQLite file of something else is refused here."""
    try:
        with connect(src, readonly=True) as db:
            return lab_uid(db)
    except StoreError as exc:
        raise BundleError(str(exc), "source") from None


def _one_line(text: str, limit: int = 200) -> str:
    """Author and host as the manifest holds them: one short printable line."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())[:limit]


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _write_data(
    src: Path,
    data: Path,
    runs: list[int],
    exps: list[int],
    secrets: Sequence[str],
    include_prompts: bool = False,
    lab: str | None = None,
) -> tuple[dict[str, int], tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """bundle.sqlite with the lab's tables and unique indexes and only the selected rows (the
    experiments this lab made marked with its uid `lab`); returns the row counts and the
    manifest's listing of experiments and runs."""
    schema = reference_schema()
    conn = sqlite3.connect(sqlite_uri(data), uri=True)
    try:
        for table in TABLES:
            conn.execute(schema.create_sql[table])
        for _table, sql, unique in schema.indexes.values():
            if unique:
                conn.execute(sql)
        conn.execute("ATTACH DATABASE ? AS src", [readonly_uri(src)])
        conn.execute("CREATE TEMP TABLE sel_runs (id INTEGER PRIMARY KEY)")
        conn.execute("CREATE TEMP TABLE sel_exps (id INTEGER PRIMARY KEY)")
        conn.execute("BEGIN")  # one read transaction over src: a consistent snapshot
        _select(conn, runs, exps)
        counts = _copy_rows(conn)
        _scrub_bundle(conn, secrets)
        if not include_prompts:
            conn.execute("UPDATE requests SET prompt_text = NULL")
        if lab is not None:  # made here: the lab's uid; an imported one keeps its maker's
            conn.execute(
                "UPDATE experiments SET lab_uid = ? WHERE lab_uid IS NULL AND "
                "coalesce(origin, 'local') NOT LIKE 'bundle:%'",
                [lab],
            )
        conn.commit()
        conn.execute("DETACH DATABASE src")
        return counts, _manifest_rows(conn)
    except sqlite3.DatabaseError as exc:
        conn.rollback()
        raise BundleError(f"cannot read {src}: {exc}", "source") from None
    finally:
        conn.close()


def _write_zip(out: Path, manifest: dict[str, Any], data: Path, uid: str) -> None:
    partial = out.with_name(f".{out.name}.{uid[:8]}.partial")
    try:
        with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
            zf.writestr(MANIFEST_NAME, json.dumps(manifest, indent=2, sort_keys=True))
            zf.write(data, DATA_NAME)
        os.replace(partial, out)  # readers of a shared folder never see half a file
    finally:
        partial.unlink(missing_ok=True)


def _ids(conn: sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[int]:
    return [int(r[0]) for r in conn.execute(sql, params)]


def _select(conn: sqlite3.Connection, runs: list[int], exps: list[int]) -> None:
    """Fill sel_runs/sel_exps; refuse ids that do not exist and runs that are not finished."""
    conn.executemany("INSERT OR IGNORE INTO sel_exps VALUES (?)", [(i,) for i in exps])
    conn.executemany("INSERT OR IGNORE INTO sel_runs VALUES (?)", [(i,) for i in runs])
    missing = _ids(conn, "select id from sel_exps where id not in (select id from src.experiments)")
    if missing:
        raise BundleError(f"no experiment {', '.join(map(str, missing))}", "not_found")
    missing = _ids(conn, "select id from sel_runs where id not in (select id from src.runs)")
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
    active = sorted(ACTIVE)
    marks = ",".join("?" * len(active))
    busy: list[str] = []
    for table, sel in (("experiments", "sel_exps"), ("runs", "sel_runs")):
        sql = (
            f"select id from src.{table} where id in (select id from {sel}) and status in ({marks})"
        )
        busy += [f"{table[:-1]} {i}" for i in _ids(conn, sql, active)]
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
        have = set(sqlite_columns(conn, table, "src"))
        cols = [c for c in sqlite_columns(conn, table) if c in have]
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
    types = reference_schema().columns
    for table in ("experiments", "runs"):
        blank = LOCAL_ONLY[table]
        conn.execute(
            f'UPDATE "{table}" SET ' + ", ".join(f'"{c}" = ?' for c in blank), list(blank.values())
        )
        text_cols = [c for c in sqlite_columns(conn, table) if types[table].get(c) == "TEXT"]
        for row in conn.execute(f'SELECT id, {", ".join(text_cols)} FROM "{table}"').fetchall():
            changed = {
                c: clean
                for c, old in zip(text_cols, row[1:], strict=True)
                if (clean := scrub_cell(c, old, secrets)) != old
            }
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
    """What the manifest lists of each experiment and run (a listing needs no SQLite)."""
    conn.row_factory = sqlite3.Row
    try:
        exps = [
            {k: r[k] for k in LISTED_EXPERIMENT_FIELDS}
            for r in conn.execute("select * from experiments order by id")
        ]
        runs = [
            {k: r[k] for k in LISTED_RUN_FIELDS}
            for r in conn.execute(
                "select r.*, e.uid as experiment_uid from runs r left join "
                "experiments e on e.id = r.experiment_id order by r.id"
            )
        ]
    finally:
        conn.row_factory = None
    return exps, runs
