"""A run's measured requests kept in a file until the DB holds them: on a full disk (or a
read-only, locked or lost DB) the storing phase fails, and the records in the runner's memory
were the only copy of what the load measured.

`keep` writes them (JSON, atomically) under the lab home's `spool/` folder, or the system's temp
folder when that write fails too, before the run's storing phase writes anything; `release`
removes the file once the run's last write went through. A file left behind is a run whose
storing did not finish: `store_spooled` (when a runner starts, and before `runs`) stores its
requests on its run when the run is no longer active and lacks them, with the summary they give
(server peaks and health are not in the file: the run stays failed, its reason says what was
stored later), then removes the file, and returns a line for the user per file.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
import uuid
from dataclasses import fields
from pathlib import Path
from typing import Any

from core import json_depth
from core.clock import now_iso
from core.records import RequestRecord
from core.status import is_active
from store import StoreError, connect, queries
from store.spooled import request_count, store_late
from tuning.settings import lab_home

VERSION = 1
NOT_KEPT = (
    "its measured requests could not be kept in a spool file (no folder took it): if storing "
    "them fails, they are lost"
)
_FIELD_ORDER = tuple(f.name for f in fields(RequestRecord))
_RECORD_FIELDS = set(_FIELD_ORDER)
# A spool file holds a whole run's requests; a million with their token gaps is a few hundred MB.
MAX_SPOOL_BYTES = 2 << 30


def spool_dirs() -> list[Path]:
    """Where spool files go, in order: the lab home's spool/, then the system's temp folder."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return [lab_home() / "spool", Path(tempfile.gettempdir()) / f"tuning-lab-spool-{uid}"]


def _db_key(db_path: str | Path) -> str:
    return str(Path(db_path).resolve())


def keep(
    db_path: str | Path, run_id: int, records: list[RequestRecord], duration_s: float
) -> Path | None:
    """The run's records in a spool file (its path), or None when no folder would take it."""
    body = {
        "version": VERSION,
        "db": _db_key(db_path),
        "run_id": run_id,
        "duration_s": duration_s,
        "saved_at": now_iso(),
        "records": [_plain(r) for r in records],
    }
    text = json.dumps(body, separators=(",", ":"))
    for folder in spool_dirs():
        target = folder / f"run-{run_id}-{uuid.uuid4().hex[:12]}.json"
        tmp = target.with_suffix(".part")
        try:
            folder.mkdir(parents=True, exist_ok=True)
            tmp.write_text(text, encoding="utf-8")
            tmp.replace(target)
            return target
        except OSError:
            tmp.unlink(missing_ok=True)
    return None


def _plain(record: RequestRecord) -> dict[str, Any]:
    """The record's fields as they are: `asdict` would deep-copy every token gap first (1.5 s of
    a 3,072-request run's 3 s of storing on the 2-core box), for the same JSON."""
    return {name: getattr(record, name) for name in _FIELD_ORDER}


def release(path: Path | None) -> None:
    """The run's last write went through: its spool file is not needed."""
    if path is not None:
        path.unlink(missing_ok=True)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_SPOOL_BYTES:
            return None
        data = json_depth.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(data, dict) and data.get("version") == VERSION
    return data if ok and isinstance(data.get("records"), list) else None


def _records(data: dict[str, Any]) -> list[RequestRecord]:
    return [
        RequestRecord(**{k: v for k, v in r.items() if k in _RECORD_FIELDS})
        for r in data["records"]
        if isinstance(r, dict)
    ]


def pending(db_path: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    """Spool files of this DB, oldest first."""
    key = _db_key(db_path)
    found = []
    for folder in spool_dirs():
        for path in sorted(folder.glob("run-*.json")) if folder.is_dir() else []:
            data = _read(path)
            if data is not None and data.get("db") == key:
                found.append((path, data))
    return found


def _store_one(db_path: str | Path, path: Path, data: dict[str, Any]) -> str | None:
    from tuning.measure.metrics import summarize

    run_id = int(data["run_id"])
    with connect(db_path) as db:
        try:
            run = queries.get_run(db, run_id)
        except StoreError:
            return f"spool file {path}: run {run_id} is not in this DB; the file is kept"
        if is_active(run.get("status")):
            return None  # its runner may still be storing it
        if request_count(db, run_id) and run.get("summary_json") is not None:
            release(path)  # the run's own write got through after all
            return None
        records = _records(data)
        note = (
            f"its {len(records)} measured requests were stored later from the spool file "
            f"{path.name} (no server peaks or health: resume the experiment to measure it again)"
        )
        summary = summarize(records, float(data["duration_s"]))
        added = store_late(db, run_id, records, summary, note)
    release(path)
    if added is None:
        return None
    return (
        f"run {run_id}: its {added} measured requests, kept in {path} when its final write "
        "failed, are stored now"
    )


def store_spooled(db_path: str | Path) -> list[str]:
    """Store what spool files hold for this DB; a line per file stored (or kept, and why)."""
    lines = []
    for path, data in pending(db_path):
        try:
            line = _store_one(db_path, path, data)
        except (sqlite3.Error, StoreError, OSError) as exc:
            line = f"spool file {path}: not stored yet ({exc}); it is kept and tried again"
        if line:
            lines.append(line)
    return lines
