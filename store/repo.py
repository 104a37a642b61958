"""Reads and writes of experiments, runs, per-request rows and samples; the only SQL the lab has
outside migrations and bundles lives here."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from sqlite_utils import Database

from core.records import RequestRecord, SampleRow
from store.db import StoreError
from store.schema import SUMMARY_COLUMNS

ACTIVE_STATUSES = ("queued", "running")
JSON_FIELDS = (
    "values_json",
    "config_json",
    "workload_json",
    "engine_json",
    "argv_json",
    "env_json",
    "hardware_json",
    "startup_json",
    "summary_json",
    "health_json",
)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_uid() -> str:
    return uuid.uuid4().hex


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _encode(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in fields.items():
        if key in JSON_FIELDS and value is not None and not isinstance(value, str):
            value = _dump(value)
        elif isinstance(value, bool):
            value = int(value)
        out[key] = value
    return out


def decode(row: dict[str, Any] | None) -> dict[str, Any] | None:
    """A row with its *_json columns parsed, under the name without the suffix."""
    if row is None:
        return None
    out = dict(row)
    for key in JSON_FIELDS:
        if key in out:
            raw = out[key]
            # `hardware` is already the comparable summary string; its details go to hardware_info.
            name = key[:-5] if key[:-5] not in row else key[:-5] + "_info"
            try:
                out[name] = json.loads(raw) if raw else None
            except ValueError:
                out[name] = None
    return out


# --- experiments -----------------------------------------------------------------------------


def create_experiment(db: Database, **fields: Any) -> int:
    fields.setdefault("uid", new_uid())
    fields.setdefault("created_at", now_iso())
    fields.setdefault("status", "queued")
    fields.setdefault("phase", "queued")
    table = db.table("experiments")
    table.insert(_encode(fields))
    return int(table.last_pk)


def update_experiment(db: Database, experiment_id: int, **fields: Any) -> None:
    db.table("experiments").update(experiment_id, _encode(fields))


def get_experiment(db: Database, experiment_id: int) -> dict[str, Any]:
    rows = list(db.query("select * from experiments where id = ?", [experiment_id]))
    if not rows:
        raise StoreError(f"no experiment {experiment_id}")
    return decode(rows[0]) or {}


def list_experiments(db: Database, include_hidden: bool = False) -> list[dict[str, Any]]:
    where = "" if include_hidden else "where coalesce(hidden, 0) = 0"
    return [
        decode(r) or {} for r in db.query(f"select * from experiments {where} order by id desc")
    ]


def active_experiments(db: Database) -> list[dict[str, Any]]:
    return [
        decode(r) or {}
        for r in db.query(
            "select * from experiments where status in (?, ?) order by id", list(ACTIVE_STATUSES)
        )
    ]


def request_cancel(db: Database, experiment_id: int) -> None:
    db.execute("update experiments set cancel_requested = 1 where id = ?", [experiment_id])
    db.conn.commit()


def cancel_requested(db: Database, experiment_id: int) -> bool:
    row = db.execute(
        "select cancel_requested from experiments where id = ?", [experiment_id]
    ).fetchone()
    return bool(row and row[0])


# --- runs ------------------------------------------------------------------------------------


def create_run(db: Database, **fields: Any) -> int:
    fields.setdefault("uid", new_uid())
    fields.setdefault("status", "pending")
    table = db.table("runs")
    table.insert(_encode(fields))
    return int(table.last_pk)


def update_run(db: Database, run_id: int, **fields: Any) -> None:
    db.table("runs").update(run_id, _encode(fields))


def store_summary(db: Database, run_id: int, summary: dict[str, Any]) -> None:
    """Keep the whole summary as JSON and its headline keys as columns."""
    columns = {
        k: (int(v) if SUMMARY_COLUMNS[k] is int and v is not None else v)
        for k, v in summary.items()
        if k in SUMMARY_COLUMNS
    }
    update_run(db, run_id, summary_json=summary, **columns)


def get_run(db: Database, run_id: int) -> dict[str, Any]:
    rows = list(db.query("select * from runs where id = ?", [run_id]))
    if not rows:
        raise StoreError(f"no run {run_id}")
    return decode(rows[0]) or {}


def get_runs(db: Database, run_ids: Iterable[int]) -> list[dict[str, Any]]:
    ids = [int(i) for i in run_ids]
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows = {
        r["id"]: decode(r) or {} for r in db.query(f"select * from runs where id in ({marks})", ids)
    }
    missing = [i for i in ids if i not in rows]
    if missing:
        raise StoreError(f"no run {', '.join(map(str, missing))}")
    return [rows[i] for i in ids]


def list_runs(
    db: Database,
    experiment_id: int | None = None,
    include_hidden: bool = False,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    clauses, params = [], []
    if experiment_id is not None:
        clauses.append("experiment_id = ?")
        params.append(experiment_id)
    if not include_hidden:
        clauses.append("coalesce(hidden, 0) = 0")
    where = ("where " + " and ".join(clauses)) if clauses else ""
    order = "order by experiment_id, seq" if experiment_id is not None else "order by id desc"
    tail = f" limit {int(limit)}" if limit else ""
    return [decode(r) or {} for r in db.query(f"select * from runs {where} {order}{tail}", params)]


def delete_run(db: Database, run_id: int) -> None:
    with db.atomic():
        db.execute("delete from samples where run_id = ?", [run_id])
        db.execute("delete from requests where run_id = ?", [run_id])
        db.execute("delete from runs where id = ?", [run_id])


def delete_experiment(db: Database, experiment_id: int) -> None:
    for run in list_runs(db, experiment_id, include_hidden=True):
        delete_run(db, int(run["id"]))
    db.execute("delete from experiments where id = ?", [experiment_id])
    db.conn.commit()


# --- per-request rows and samples --------------------------------------------------------------


def insert_requests(db: Database, run_id: int, records: Iterable[RequestRecord]) -> int:
    rows = (
        {
            "run_id": run_id,
            "idx": r.index,
            "start_s": r.start,
            "ttft_s": r.ttft,
            "end_s": r.end,
            "itl_json": json.dumps(r.itl),
            "prompt_tokens": r.prompt_tokens,
            "output_tokens": r.output_tokens,
            "ok": int(r.ok),
            "http_status": r.http_status,
            "error": r.error,
            "error_kind": r.error_kind,
        }
        for r in records
    )
    count = 0
    with db.atomic():
        for chunk in _chunks(rows, 2000):
            db.table("requests").insert_all(chunk, batch_size=2000)
            count += len(chunk)
    return count


def get_requests(db: Database, run_id: int) -> list[RequestRecord]:
    out = []
    for r in db.execute(
        "select idx, start_s, ttft_s, end_s, itl_json, prompt_tokens, "
        "output_tokens, ok, http_status, error, error_kind from requests "
        "where run_id = ? order by idx",
        [run_id],
    ):
        out.append(
            RequestRecord(
                index=r[0],
                start=r[1],
                ttft=r[2],
                end=r[3],
                itl=json.loads(r[4]) if r[4] else [],
                prompt_tokens=r[5],
                output_tokens=r[6],
                ok=bool(r[7]),
                http_status=r[8],
                error=r[9],
                error_kind=r[10],
            )
        )
    return out


def count_requests(db: Database, run_id: int) -> int:
    return int(db.execute("select count(*) from requests where run_id = ?", [run_id]).fetchone()[0])


def insert_samples(db: Database, run_id: int, rows: Iterable[SampleRow]) -> int:
    batch = [
        {"run_id": run_id, "t_s": s.t, "series": s.series, "label": s.label, "value": s.value}
        for s in rows
    ]
    if batch:
        db.table("samples").insert_all(batch, batch_size=5000)
    return len(batch)


def get_samples(
    db: Database, run_id: int, series: Iterable[str] | None = None, since_t: float | None = None
) -> list[dict[str, Any]]:
    clauses, params = ["run_id = ?"], [run_id]
    if series is not None:
        names = list(series)
        clauses.append(f"series in ({','.join('?' * len(names))})")
        params += names
    if since_t is not None:
        clauses.append("t_s > ?")
        params.append(since_t)
    return list(
        db.query(
            f"select t_s, series, label, value from samples where "
            f"{' and '.join(clauses)} order by t_s",
            params,
        )
    )


def relabel_processes(db: Database, run_id: int, names_by_pid: dict[int, str]) -> int:
    """Give each process of a run's samples the name the engine logged for its pid.

    A process sampled before it set its title (or where setproctitle is missing, as on the GPU
    box) appears as `python3:<pid>`; vLLM's log says `(EngineCore pid=<pid>)`, so one pid ends up
    under one name and the chart shows EngineCore holding the memory.
    """
    changed = 0
    with db.atomic():
        for pid, name in names_by_pid.items():
            label = f"{name}:{int(pid)}"
            cur = db.execute(
                "update samples set label = ? where run_id = ? and label like ? and label != ?",
                [label, run_id, f"%:{int(pid)}", label],
            )
            changed += cur.rowcount
    return changed


def sample_series(db: Database, run_id: int) -> list[str]:
    return [
        r[0] for r in db.execute("select distinct series from samples where run_id = ?", [run_id])
    ]


def _chunks(
    it: Iterator[dict[str, Any]] | Iterable[dict[str, Any]], size: int
) -> Iterator[list[dict[str, Any]]]:
    chunk: list[dict[str, Any]] = []
    for item in it:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
