"""Importing a bundle: validate it, then merge its rows into a lab by uid in one transaction.

A refused bundle leaves the target byte-for-byte as it was (the target is opened only once the
bundle has passed every check), and importing a bundle twice adds nothing the second time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from core.redact import env_secrets, scrub_row, scrub_text
from store.bundle.format import (
    DEFAULT_LIMITS,
    LOCAL_ONLY,
    TABLES,
    ImportResult,
    Limits,
    Manifest,
    reference_schema,
    table_columns,
)
from store.bundle.validate import open_bundle
from store.db import connect

_BATCH = 5000


def import_bundle(
    db_path: str | Path, bundle_path: str | Path, limits: Limits = DEFAULT_LIMITS
) -> ImportResult:
    """Validate, then merge by uid in one transaction; BundleError leaves the target untouched.

    New runs get new local ids, their experiment_id is remapped, and requests and samples follow
    them; rows whose uid is already here are left alone. Imported rows carry `origin`.
    """
    with open_bundle(bundle_path, limits) as (manifest, src), connect(db_path) as db:
        return _merge(db.conn, src, manifest)


def _merge(conn: sqlite3.Connection, src: sqlite3.Connection, manifest: Manifest) -> ImportResult:
    result = ImportResult(manifest=manifest)
    merger = _Merger(conn, src, manifest.origin)
    conn.execute("BEGIN IMMEDIATE")
    try:
        exp_map: dict[int, int] = {}
        for rec in merger.rows("experiments"):
            local = conn.execute(
                "SELECT id FROM experiments WHERE uid = ?", [rec["uid"]]
            ).fetchone()
            if local:
                exp_map[int(rec["id"])] = int(local[0])
                result.experiments_known += 1
                continue
            exp_map[int(rec["id"])] = new_id = merger.add("experiments", rec)
            result.experiments_added.append(new_id)
        run_map: dict[int, int] = {}
        for rec in merger.rows("runs"):
            if conn.execute("SELECT 1 FROM runs WHERE uid = ?", [rec["uid"]]).fetchone():
                result.runs_known += 1
                continue
            exp = rec.get("experiment_id")
            rec["experiment_id"] = exp_map.get(int(exp)) if exp is not None else None
            run_map[int(rec["id"])] = new_id = merger.add("runs", rec)
            result.runs_added.append(new_id)
        if run_map:
            result.requests_added = merger.copy_children("requests", run_map, "error")
            result.samples_added = merger.copy_children("samples", run_map, "label")
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return result


class _Merger:
    """Copies rows from a validated bundle into the target: only the columns both sides know
    (a target with more columns leaves them empty), scrubbed again on the way in."""

    def __init__(self, conn: sqlite3.Connection, src: sqlite3.Connection, origin: str) -> None:
        self.conn = conn
        self.src = src
        self.origin = origin
        self.secrets: Sequence[str] = env_secrets()
        ref = reference_schema()
        self.cols: dict[str, list[str]] = {}
        for table in TABLES:
            here = set(table_columns(conn, table))
            self.cols[table] = [
                c for c in table_columns(src, table) if c in here and c in ref.columns[table]
            ]

    def rows(self, table: str) -> list[dict[str, Any]]:
        cols = self.cols[table]
        names = ", ".join(f'"{c}"' for c in cols)
        return [
            dict(zip(cols, row, strict=True))
            for row in self.src.execute(f'SELECT {names} FROM "{table}" ORDER BY id')
        ]

    def add(self, table: str, rec: Mapping[str, Any]) -> int:
        """Insert one experiment or run under a new local id; returns that id."""
        row = scrub_row({k: v for k, v in rec.items() if k != "id"}, self.secrets)
        row.update(LOCAL_ONLY[table])
        row.update(origin=self.origin, hidden=0)
        cols = list(row)
        names = ", ".join(f'"{c}"' for c in cols)
        cur = self.conn.execute(
            f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(cols))})',
            [row[c] for c in cols],
        )
        return int(cur.lastrowid or 0)

    def copy_children(self, table: str, run_map: Mapping[int, int], text_col: str) -> int:
        """Request rows or samples of the added runs, with run_id remapped and `text_col`
        scrubbed; returns how many were copied."""
        cols = self.cols[table]
        pos = cols.index("run_id")
        tpos = cols.index(text_col) if text_col in cols else -1
        names = ", ".join(f'"{c}"' for c in cols)
        sql = f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(cols))})'
        count = 0
        batch: list[list[Any]] = []
        for row in self.src.execute(f'SELECT {names} FROM "{table}" ORDER BY rowid'):
            new_run = run_map.get(row[pos])
            if new_run is None:
                continue
            values = list(row)
            values[pos] = new_run
            if tpos >= 0 and isinstance(values[tpos], str):
                values[tpos] = scrub_text(values[tpos], self.secrets)
            batch.append(values)
            if len(batch) >= _BATCH:
                self.conn.executemany(sql, batch)
                count += len(batch)
                batch = []
        if batch:
            self.conn.executemany(sql, batch)
            count += len(batch)
        return count
