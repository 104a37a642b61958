"""The engine-flag cache (schema m011_engine_flags): a catalog per interpreter and vLLM version."""

from __future__ import annotations

import json
from typing import Any

from sqlite_utils import Database


def load(db: Database, python: str, vllm_version: str) -> dict[str, Any] | None:
    """The cached catalog (as tuning.engine.flags.catalog.Catalog.to_dict), or None."""
    row = db.execute(
        "SELECT catalog_json FROM engine_flags WHERE python = ? AND vllm_version = ?",
        [python, vllm_version],
    ).fetchone()
    if row is None:
        return None
    try:
        raw = json.loads(row[0])
    except ValueError:
        return None
    return raw if isinstance(raw, dict) else None


def save(db: Database, python: str, vllm_version: str, catalog: dict[str, Any]) -> None:
    db.table("engine_flags").upsert(
        {
            "python": python,
            "vllm_version": vllm_version,
            "read_at": float(catalog.get("read_at") or 0.0),
            "catalog_json": json.dumps(catalog),
        },
        pk=("python", "vllm_version"),
    )


def load_version(
    db: Database, vllm_version: str, python: str | None = None
) -> dict[str, Any] | None:
    """The cached catalog of one vLLM version: the one read through `python` when cached, else
    any interpreter's (a version's flag defaults are the same wherever it is installed); None
    when that version was never read, or the store predates the cache."""
    if "engine_flags" not in db.table_names():
        return None
    if python and (exact := load(db, python, vllm_version)) is not None:
        return exact
    rows = db.execute(
        "SELECT python FROM engine_flags WHERE vllm_version = ? ORDER BY read_at DESC",
        [vllm_version],
    ).fetchall()
    return next((raw for (py,) in rows if (raw := load(db, py, vllm_version)) is not None), None)


def load_newest(db: Database, python: str) -> dict[str, Any] | None:
    """The newest cached catalog read through `python`, whatever its vLLM version (a reader that
    must not ask the interpreter which version it has); None when none was read."""
    if "engine_flags" not in db.table_names():
        return None
    row = db.execute(
        "SELECT vllm_version FROM engine_flags WHERE python = ? ORDER BY read_at DESC LIMIT 1",
        [python],
    ).fetchone()
    return None if row is None else load(db, python, row[0])
