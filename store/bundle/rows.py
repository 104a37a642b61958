"""The rows of an untrusted bundle: counts as the manifest says and within limits, every value of
its declared type and JSON of its shape, no cell over its cap, the fields the lab reads present,
valid unique uids, finished rows, references that stay inside the bundle, and each experiment and
run as the manifest lists it (a listing is what the team folder shows without opening SQLite).
Run on the private read-only copy `store.bundle.validate` extracted; BundleError names the table
and the field."""

from __future__ import annotations

import json
import sqlite3

from core.status import ACTIVE
from store.bundle.format import (
    DATA_NAME,
    LISTED_EXPERIMENT_FIELDS,
    LISTED_RUN_FIELDS,
    TABLES,
    BundleError,
    BundleLimits,
    Manifest,
    reference_schema,
    sqlite_columns,
)
from store.json_shapes import SHAPES, shape_problem
from store.schema import JSON_COLUMNS

_ALLOWED_TYPES = {
    "INTEGER": ("null", "integer"),
    "REAL": ("null", "real", "integer"),
    "TEXT": ("null", "text"),
}
# Fields every reader of the lab takes as given (`runs` formats them, Compare groups by them): a
# bundle without them is refused, naming the field, rather than crashing a listing later.
REQUIRED_VALUES = {
    "experiments": ("name", "param", "values_json", "status"),
    "runs": ("experiment_id", "seq", "param", "value", "status"),
}


def check_rows(conn: sqlite3.Connection, manifest: Manifest, limits: BundleLimits) -> None:
    """Row counts as the manifest says and within limits, typed values, the fields the lab reads
    present, valid uids, finished rows, and references that stay inside the bundle."""
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
        _check_types(conn, table)
        _check_required(conn, table)
        _check_cells(conn, table, limits.max_cell_bytes)
    for table in ("experiments", "runs"):
        _check_uids(conn, table)
    _check_references(conn)
    check_shapes(conn)
    exps = {r[0] for r in conn.execute("SELECT uid FROM experiments")}
    runs = {r[0] for r in conn.execute("SELECT uid FROM runs")}
    if exps != set(manifest.experiment_uids) or runs != set(manifest.run_uids):
        raise BundleError(f"manifest's uids do not match {DATA_NAME}", "manifest")
    _check_listing(conn, manifest)


def _check_listing(conn: sqlite3.Connection, manifest: Manifest) -> None:
    """Every field the manifest lists of an experiment or run (uid, name, parameter, value,
    status, author, host, start) is the row's: a bundle whose data was changed after its manifest
    was written (the checksum fixed, the listing not) is refused. A field a manifest does not
    list (an older lab's) is not compared."""
    for table, listed in (("experiments", manifest.experiments), ("runs", manifest.runs)):
        by_uid = {str(item["uid"]): item for item in listed}
        names, cur = _listed_rows(conn, table)
        for values in cur:
            row = dict(zip(names, values, strict=True))
            item = by_uid.get(str(row["uid"]), {})
            for key, said in item.items():
                if key in row and row[key] != said:  # a field it lists and the row holds
                    raise BundleError(
                        f"manifest lists {table[:-1]} {row['uid']} with {key} {_short(said)} but "
                        f"{DATA_NAME} holds {_short(row[key])}: the data was changed after the "
                        "manifest was written",
                        "manifest",
                    )


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _check_types(conn: sqlite3.Connection, table: str) -> None:
    """Every value of the declared storage class, every JSON column valid JSON: one scan."""
    declared = reference_schema().columns[table]
    probes, labels = [], []
    for col in sqlite_columns(conn, table):
        allowed = ", ".join(f"'{t}'" for t in _ALLOWED_TYPES[declared[col]])
        probes.append(f'sum(typeof("{col}") NOT IN ({allowed}))')
        labels.append((col, f"value(s) of the wrong type (expected {declared[col]})"))
        if col in JSON_COLUMNS:
            probes.append(
                f'sum("{col}" IS NOT NULL AND typeof("{col}") = \'text\' AND '
                f'NOT json_valid("{col}"))'
            )
            labels.append((col, "value(s) that are not valid JSON"))
    sums = conn.execute(f'SELECT {", ".join(probes)} FROM "{table}"').fetchone()
    for (col, what), bad in zip(labels, sums, strict=True):
        if bad:
            raise BundleError(f"{table}.{col} holds {bad} {what}", "types")


def _check_required(conn: sqlite3.Connection, table: str) -> None:
    """No NULL (or missing column) where every reader of the lab expects a value."""
    have = set(sqlite_columns(conn, table))
    for col in REQUIRED_VALUES.get(table, ()):
        row = (
            conn.execute(f'SELECT uid FROM "{table}" WHERE "{col}" IS NULL LIMIT 1').fetchone()
            if col in have
            else conn.execute(f'SELECT uid FROM "{table}" LIMIT 1').fetchone()
        )
        if row is not None:
            raise BundleError(
                f"{table}.{col} is empty (NULL) in {table[:-1]} {row[0]}: refused (the lab "
                "needs it to list and compare)",
                "types",
            )


def _check_cells(conn: sqlite3.Connection, table: str, limit: int) -> None:
    """No text cell over `limit` bytes (a 10 MB note is not a measurement): refused, naming it."""
    declared = reference_schema().columns[table]
    cols = [c for c in sqlite_columns(conn, table) if declared[c] == "TEXT"]
    if not cols:
        return
    probes = ", ".join(f'max(coalesce(length(CAST("{c}" AS BLOB)), 0))' for c in cols)
    sizes = conn.execute(f'SELECT {probes} FROM "{table}"').fetchone()
    for col, size in zip(cols, sizes, strict=True):
        if size and size > limit:
            key = "uid" if table in ("experiments", "runs") else "run_id"
            row = conn.execute(
                f'SELECT "{key}" FROM "{table}" WHERE length(CAST("{col}" AS BLOB)) > ? LIMIT 1',
                [limit],
            ).fetchone()
            raise BundleError(
                f"{table}.{col} of {key} {row[0] if row else '?'} is {size:,} bytes; the limit "
                f"for one cell is {limit:,}: refused",
                "too_large",
            )


def check_shapes(conn: sqlite3.Connection) -> None:
    """Every JSON column of experiments and runs of its shape (store.json_shapes), and every
    request's itl_json a list of numbers: BundleError naming the column and the row."""
    for table in ("experiments", "runs"):
        cols = [c for c in sqlite_columns(conn, table) if c in SHAPES]
        if not cols:
            continue
        names = ", ".join(f'"{c}"' for c in cols)
        for uid, *cells in conn.execute(f'SELECT uid, {names} FROM "{table}" ORDER BY id'):
            for col, raw in zip(cols, cells, strict=True):
                if raw is None:
                    continue
                try:
                    why = shape_problem(col, json.loads(raw))
                except (ValueError, RecursionError):
                    why = "is not valid JSON"
                if why:
                    raise BundleError(
                        f"{table}.{col} of {table[:-1]} {uid} {why}: refused", "types"
                    )
    bad = conn.execute(
        "SELECT run_id, idx FROM requests WHERE itl_json IS NOT NULL AND ("
        "json_type(itl_json) != 'array' OR EXISTS (SELECT 1 FROM json_each(itl_json) "
        "WHERE type NOT IN ('integer', 'real'))) LIMIT 1"
    ).fetchone()
    if bad:
        raise BundleError(
            f"requests.itl_json of request {bad[1]} of run id {bad[0]} is not a list of "
            "numbers: refused",
            "types",
        )


def _check_uids(conn: sqlite3.Connection, table: str) -> None:
    bad = conn.execute(
        f'SELECT uid FROM "{table}" WHERE uid IS NULL OR length(uid) < 8 OR '
        f"length(uid) > 64 OR uid GLOB '*[^0-9A-Za-z_-]*' LIMIT 1"
    ).fetchone()
    if bad:
        raise BundleError(f"{table} has an invalid uid {bad[0]!r}", "types")
    if table == "experiments" and "lab_uid" in sqlite_columns(conn, table):
        lab = conn.execute(
            "SELECT uid FROM experiments WHERE lab_uid IS NOT NULL AND (length(lab_uid) < 8 OR "
            "length(lab_uid) > 64 OR lab_uid GLOB '*[^0-9A-Za-z_-]*') LIMIT 1"
        ).fetchone()
        if lab:
            raise BundleError(f"experiments.lab_uid of experiment {lab[0]} is not a uid", "types")
    dup = conn.execute(
        f'SELECT uid FROM "{table}" GROUP BY uid HAVING count(*) > 1 LIMIT 1'
    ).fetchone()
    if dup:
        raise BundleError(f"{table} uid {dup[0]!r} appears twice", "invalid")
    active = sorted(ACTIVE)
    busy = conn.execute(
        f'SELECT uid FROM "{table}" WHERE status IN ({",".join("?" * len(active))}) LIMIT 1',
        active,
    ).fetchone()
    if busy:
        raise BundleError(f"bundle holds an unfinished {table[:-1]} ({busy[0]})", "invalid")


def _check_references(conn: sqlite3.Connection) -> None:
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


def _listed_rows(conn: sqlite3.Connection, table: str) -> tuple[list[str], sqlite3.Cursor]:
    """(names, cursor) of the listed fields of `table` that its rows hold (a bundle may lack a
    column the lab added later); a run's experiment by uid."""
    have = set(sqlite_columns(conn, table))
    if table == "experiments":
        names = [c for c in LISTED_EXPERIMENT_FIELDS if c in have]
        listed = ", ".join(f'"{c}"' for c in names)
        return names, conn.execute(f"SELECT {listed} FROM experiments")
    names = [c for c in LISTED_RUN_FIELDS if c in have or c == "experiment_uid"]
    cols = ["e.uid" if c == "experiment_uid" else f'r."{c}"' for c in names]
    sql = f"SELECT {', '.join(cols)} FROM runs r LEFT JOIN experiments e ON e.id = r.experiment_id"
    return names, conn.execute(sql)
