"""Importing a bundle: validate it, then merge its rows into a lab by uid in one transaction.

A refused bundle leaves the target byte-for-byte as it was (the target is written only once the
bundle has passed every check), and importing a bundle twice adds nothing the second time.

Everything slow happens before the write lock is taken: the bundle is validated (store.bundle.
validate, JSON shapes included), its experiments and runs are read and scrubbed, and the distinct
error texts and sample labels of its children are scrubbed once. Inside `write_transaction` the
merge only looks up uids and inserts.

Ownership: a bundle never changes an experiment it does not own. Rows whose uid is already here
are left as they are (never updated), so a round trip (this lab's runs coming back in a
teammate's bundle) adds nothing and refuses nothing.

An experiment made in this lab (its `origin` is local: this lab's own record, which no bundle
writes, since every imported row's origin names its bundle; or its `lab_uid` is this lab's) takes
no new run from any bundle, whatever lab uid the manifest names: the uid is printed in every
manifest the lab publishes, so a forger can copy it (issue 41: a forged bundle put 252,453 tok/s
into Compare that way), and a backup or second checkout of this lab names it the same way; the two
cannot be told apart, so neither adds runs.

Runs join an imported experiment only from the lab that made it (`experiments.lab_uid`): a bundle
whose manifest names that lab, and that describes the experiment the same way (parameter, values,
configuration, workload), as when a teammate shares more runs of one experiment later. A bundle
from anyone else, or from a lab that does not say which it is, is refused. That lab's word is the
manifest's: it keeps honest teammates' bundles apart, it is no signature.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from core.redact import env_secrets, scrub_row, scrub_text
from store.bundle.format import (
    DEFAULT_LIMITS,
    LOCAL_ONLY,
    TABLES,
    BundleError,
    BundleLimits,
    ImportResult,
    Manifest,
    reference_schema,
    sqlite_columns,
)
from store.bundle.validate import open_bundle
from store.db import connect, write_transaction
from store.schema import lab_uid

_BATCH = 5000
# What makes two experiment rows the same experiment (a bundle may add runs to an imported one).
_DEFINITION = ("param", "values_json", "config_json", "workload_json")
_CHILD_TEXT = {"requests": "error", "samples": "label"}


def import_bundle(
    db_path: str | Path, bundle_path: str | Path, limits: BundleLimits = DEFAULT_LIMITS
) -> ImportResult:
    """Validate, then merge by uid in one transaction; BundleError leaves the target untouched.

    New runs get new local ids, their experiment_id is remapped, and requests and samples follow
    them; rows whose uid is already here are left alone. Imported rows carry `origin`.
    """
    with open_bundle(bundle_path, limits) as (manifest, src), connect(db_path) as db:
        merger = _Merger(db, src, manifest)
        prepared = merger.prepare()  # reads and scrubs: no lock held
        merger.check_ownership(prepared)  # refused here, the target is not even locked
        with write_transaction(db):
            return merger.merge(prepared)


@dataclass(frozen=True)
class _Here:
    """An experiment of the bundle already in this lab: its id, origin, the uid of the lab that
    made it (None: not known, so no bundle may add to it), and whether this lab made it (then no
    bundle may add to it either)."""

    id: int
    origin: str
    maker: str | None
    made_here: bool


@dataclass
class _Prepared:
    experiments: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    child_text: dict[str, dict[str, str]] = field(default_factory=dict)  # table -> old -> clean


class _Merger:
    """Copies rows from a validated bundle into the target: only the columns both sides know
    (a target with more columns leaves them empty), scrubbed again on the way in."""

    def __init__(self, db: Database, src: sqlite3.Connection, manifest: Manifest) -> None:
        self.conn = db.conn
        self.src = src
        self.manifest = manifest
        self.origin = manifest.origin
        self.here_lab = lab_uid(db)
        self.secrets: Sequence[str] = env_secrets()
        ref = reference_schema()
        self.cols: dict[str, list[str]] = {}
        for table in TABLES:
            here = set(sqlite_columns(self.conn, table))
            self.cols[table] = [
                c for c in sqlite_columns(src, table) if c in here and c in ref.columns[table]
            ]

    # -- before the lock ------------------------------------------------------------------------
    def prepare(self) -> _Prepared:
        out = _Prepared(self._rows("experiments"), self._rows("runs"))
        for table, col in _CHILD_TEXT.items():
            if col not in self.cols[table]:
                continue
            out.child_text[table] = {
                value: clean
                for (value,) in self.src.execute(
                    f'SELECT DISTINCT "{col}" FROM "{table}" WHERE typeof("{col}") = \'text\''
                )
                if (clean := scrub_text(value, self.secrets)) != value
            }
        return out

    def _rows(self, table: str) -> list[dict[str, Any]]:
        cols = self.cols[table]
        names = ", ".join(f'"{c}"' for c in cols)
        rows = []
        for values in self.src.execute(f'SELECT {names} FROM "{table}" ORDER BY id'):
            rec = dict(zip(cols, values, strict=True))
            row = scrub_row({k: v for k, v in rec.items() if k != "id"}, self.secrets)
            row.update(LOCAL_ONLY[table])
            row.update(origin=self.origin, hidden=0)
            row["id"] = rec["id"]
            rows.append(row)
        return rows

    def check_ownership(self, prepared: _Prepared) -> None:
        """BundleError when a new run of the bundle would go into an experiment already here
        that the bundle may not add to (run again under the lock by `merge`)."""
        by_id = {int(e["id"]): e for e in prepared.experiments}
        local = {exp_id: self._local(rec["uid"]) for exp_id, rec in by_id.items()}
        for run in prepared.runs:
            exp = run.get("experiment_id")
            if exp is None or (here := local.get(int(exp))) is None:
                continue
            if self.conn.execute("SELECT 1 FROM runs WHERE uid = ?", [run["uid"]]).fetchone():
                continue
            self._may_add_to(by_id[int(exp)], here, run["uid"])

    def _local(self, uid: str) -> _Here | None:
        """The experiment of this uid already here, with who made it, or None."""
        row = self.conn.execute(
            "SELECT id, origin, lab_uid FROM experiments WHERE uid = ?", [uid]
        ).fetchone()
        if row is None:
            return None
        origin = str(row[1] or "local")
        imported = origin.startswith("bundle:")  # set by the import, never taken from a bundle
        maker = row[2] or (None if imported else self.here_lab)
        made_here = not imported or (maker is not None and maker == self.here_lab)
        return _Here(int(row[0]), origin, maker, made_here)

    # -- under the lock -------------------------------------------------------------------------
    def merge(self, prepared: _Prepared) -> ImportResult:
        result = ImportResult(manifest=self.manifest)
        exp_map: dict[int, int] = {}
        known_exps: dict[int, _Here] = {}  # bundle id -> the experiment already here
        for rec in prepared.experiments:
            local = self._local(rec["uid"])
            if local:
                exp_map[int(rec["id"])] = local.id
                known_exps[int(rec["id"])] = local
                result.experiments_known += 1
                continue
            exp_map[int(rec["id"])] = new_id = self._add("experiments", rec)
            result.experiments_added.append(new_id)
        run_map: dict[int, int] = {}
        by_id = {int(e["id"]): e for e in prepared.experiments}
        for rec in prepared.runs:
            if self.conn.execute("SELECT 1 FROM runs WHERE uid = ?", [rec["uid"]]).fetchone():
                result.runs_known += 1
                continue
            exp = rec.get("experiment_id")
            if exp is not None and int(exp) in known_exps:
                self._may_add_to(by_id[int(exp)], known_exps[int(exp)], rec["uid"])
            rec = {**rec, "experiment_id": exp_map.get(int(exp)) if exp is not None else None}
            run_map[int(rec["id"])] = new_id = self._add("runs", rec)
            result.runs_added.append(new_id)
        if run_map:
            result.requests_added = self._copy_children("requests", run_map, prepared)
            result.samples_added = self._copy_children("samples", run_map, prepared)
        return result

    def _may_add_to(self, bundled: Mapping[str, Any], here: _Here, run_uid: str) -> None:
        """A new run for an experiment already here: never for one made in this lab; for an
        imported one only from the lab that made it, and only when the bundle describes the
        experiment the same way."""
        name = bundled.get("name") or bundled["uid"]
        m = self.manifest
        where = f"bundle {m.bundle_uid} ({m.author}@{m.host}) adds run {run_uid} to experiment "
        where += f"{here.id} ({name!r}), "
        if here.made_here:
            raise BundleError(
                f"{where}which was made in this lab: refused (no bundle adds runs to an "
                "experiment made here, whatever lab it names: a lab uid is a name, not a proof; "
                "a bundle never changes an experiment it does not own; nothing was imported)",
                "ownership",
            )
        if here.maker is None or m.lab_uid != here.maker:
            raise BundleError(
                f"{where}which came from another lab ({here.origin}): refused (runs join an "
                "experiment only from the lab that made it; a bundle never changes an experiment "
                "it does not own; nothing was imported)",
                "ownership",
            )
        cols = ", ".join(f'"{c}"' for c in _DEFINITION)
        stored = self.conn.execute(
            f"SELECT {cols} FROM experiments WHERE id = ?", [here.id]
        ).fetchone()
        for col, mine in zip(_DEFINITION, stored, strict=True):
            if _same(col, mine, bundled.get(col)):
                continue
            raise BundleError(
                f"{where}but describes it differently ({col}): refused (nothing was imported)",
                "ownership",
            )

    def _add(self, table: str, rec: Mapping[str, Any]) -> int:
        """Insert one experiment or run under a new local id; returns that id."""
        cols = [c for c in rec if c != "id"]
        names = ", ".join(f'"{c}"' for c in cols)
        cur = self.conn.execute(
            f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" * len(cols))})',
            [rec[c] for c in cols],
        )
        return int(cur.lastrowid or 0)

    def _copy_children(self, table: str, run_map: Mapping[int, int], prepared: _Prepared) -> int:
        """Request rows or samples of the added runs, with run_id remapped and their text
        column replaced by its scrubbed form; returns how many were copied."""
        cols = self.cols[table]
        pos = cols.index("run_id")
        text_col = _CHILD_TEXT[table]
        tpos = cols.index(text_col) if text_col in cols else -1
        clean = prepared.child_text.get(table, {})
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
            if tpos >= 0 and clean and values[tpos] in clean:
                values[tpos] = clean[values[tpos]]
            batch.append(values)
            if len(batch) >= _BATCH:
                self.conn.executemany(sql, batch)
                count += len(batch)
                batch = []
        if batch:
            self.conn.executemany(sql, batch)
            count += len(batch)
        return count


def _same(column: str, a: Any, b: Any) -> bool:
    """Two stored cells equal, JSON columns compared as parsed values."""
    if a == b:
        return True
    if column.endswith("_json") and isinstance(a, str) and isinstance(b, str):
        try:
            return bool(json.loads(a) == json.loads(b))
        except (ValueError, RecursionError):
            return False
    return False
