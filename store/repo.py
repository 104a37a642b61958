"""Every write of the lab's tables: experiments, runs, per-request rows and samples (reads are in
store.queries)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

from sqlite_utils import Database

from core.clock import now_iso
from core.records import NewExperiment, RequestRecord, SampleRow
from core.redact import clean_url
from core.status import Status, is_active
from store import queries
from store.db import StoreError, write_transaction
from store.schema import JSON_COLUMNS, SUMMARY_COLUMNS


def new_uid() -> str:
    return uuid.uuid4().hex


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _encode(fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in fields.items():
        if key in JSON_COLUMNS and value is not None and not isinstance(value, str):
            value = _dump(value)
        elif isinstance(value, bool):
            value = int(value)
        elif key == "base_url" and isinstance(value, str):
            value = clean_url(value)  # never `user:pw@` or `?token=` in the DB
        out[key] = value
    return out


# --- experiments -----------------------------------------------------------------------------


def _insert(db: Database, table_name: str, fields: dict[str, Any]) -> int:
    """One new experiment or run with a fresh uid unless given; returns its id."""
    fields.setdefault("uid", new_uid())
    table = db.table(table_name)
    row = _encode(fields)
    with write_transaction(db):
        table.insert(row)
    if table.last_pk is None:
        raise StoreError(f"no id for the new {table_name} row")
    return int(table.last_pk)


def create_experiment(db: Database, new: NewExperiment, **state: Any) -> int:
    """Write `new` (validated before it got here: tuning.experiment.spec) queued; `state` sets
    other columns of the row (a status, an origin); returns its id."""
    fields = {**new.columns(), **state}
    fields.setdefault("created_at", now_iso())
    fields.setdefault("status", Status.QUEUED.value)
    fields.setdefault("phase", "queued")
    return _insert(db, "experiments", fields)


def update_experiment(db: Database, experiment_id: int, **fields: Any) -> None:
    row = _encode(fields)
    with write_transaction(db):
        db.table("experiments").update(experiment_id, row)


def request_cancel(db: Database, experiment_id: int) -> None:
    with write_transaction(db):
        db.execute("update experiments set cancel_requested = 1 where id = ?", [experiment_id])


# --- runs ------------------------------------------------------------------------------------


def create_run(db: Database, **fields: Any) -> int:
    fields.setdefault("status", Status.PENDING.value)
    return _insert(db, "runs", fields)


def update_run(db: Database, run_id: int, **fields: Any) -> None:
    row = _encode(fields)
    with write_transaction(db):
        db.table("runs").update(run_id, row)


def store_summary(db: Database, run_id: int, summary: dict[str, Any]) -> None:
    """Keep the whole summary as JSON and its headline keys as columns."""
    columns = {
        k: (int(v) if SUMMARY_COLUMNS[k] is int and v is not None else v)
        for k, v in summary.items()
        if k in SUMMARY_COLUMNS
    }
    update_run(db, run_id, summary_json=summary, **columns)


def copy_run(db: Database, run_id: int, **fields: Any) -> int:
    """A new run (fresh id and uid) holding run `run_id`'s row, request rows and samples, with
    `fields` in place (its experiment, position, `reused_from_json`); returns the new id."""
    rows = list(db.query("select * from runs where id = ?", [run_id]))
    if not rows:
        raise StoreError(f"no run {run_id}")
    row = dict(rows[0])
    row.pop("id")
    row.update(_encode({**fields, "uid": fields.get("uid") or new_uid()}))
    table = db.table("runs")
    with write_transaction(db):
        table.insert(row)
        if table.last_pk is None:
            raise StoreError("no id for the copied run")
        new_id = int(table.last_pk)
        for child in ("requests", "samples"):
            cols = ", ".join(f"[{c}]" for c in db.table(child).columns_dict if c != "run_id")
            db.execute(
                f"insert into {child} (run_id, {cols}) select ?, {cols} from {child} "
                "where run_id = ?",
                [new_id, run_id],
            )
    return new_id


class ActiveRowError(StoreError):
    """A row that a live runner still writes cannot be deleted."""


def delete_run(db: Database, run_id: int) -> None:
    """A run with its request rows and samples; refused while it is still running."""
    status = queries.get_run(db, run_id)["status"]
    if is_active(status):
        raise ActiveRowError(f"run {run_id} is still {status}: stop its experiment first")
    _delete_runs(db, [run_id])


def delete_experiment(db: Database, experiment_id: int) -> None:
    """An experiment and all its runs; refused while it is active."""
    status = queries.get_experiment(db, experiment_id)["status"]
    if is_active(status):
        raise ActiveRowError(f"experiment {experiment_id} is {status}: stop it first")
    with write_transaction(db):
        ids = queries.experiment_run_ids(db, experiment_id)
        _delete_runs(db, ids)
        db.execute("delete from experiments where id = ?", [experiment_id])


def _delete_runs(db: Database, run_ids: list[int]) -> None:
    with write_transaction(db):
        for run_id in run_ids:
            db.execute("delete from samples where run_id = ?", [run_id])
            db.execute("delete from requests where run_id = ?", [run_id])
            db.execute("delete from runs where id = ?", [run_id])


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
            "conversation": r.conversation,
            "turn": r.turn,
            "dispatch_lag_s": r.dispatch_lag,
        }
        for r in records
    )
    count = 0
    with write_transaction(db):
        for chunk in _chunks(rows, 2000):
            db.table("requests").insert_all(chunk, batch_size=2000)
            count += len(chunk)
    return count


def store_request_prompts(
    db: Database, run_id: int, prompts: Iterable[tuple[int, str, str | None]]
) -> int:
    """Each (idx, sha256, text) onto the run's request row idx: the content hash, and the prompt
    text (None keeps only the hash). Rows that do not exist are skipped; returns rows updated."""
    count = 0
    with write_transaction(db):
        for idx, digest, text in prompts:
            cur = db.execute(
                "update requests set prompt_sha256 = ?, prompt_text = ? "
                "where run_id = ? and idx = ?",
                [digest, text, run_id, idx],
            )
            count += cur.rowcount
    return count


def insert_samples(db: Database, run_id: int, rows: Iterable[SampleRow]) -> int:
    batch = [
        {"run_id": run_id, "t_s": s.t, "series": s.series, "label": s.label, "value": s.value}
        for s in rows
    ]
    if batch:
        with write_transaction(db):
            db.table("samples").insert_all(batch, batch_size=5000)
    return len(batch)


def relabel_processes(db: Database, run_id: int, names_by_pid: dict[int, str]) -> int:
    """Give each process of a run's samples the name the engine logged for its pid.

    A process sampled before it set its title (or where setproctitle is missing, as on the GPU
    box) appears as `python3:<pid>`; vLLM's log says `(EngineCore pid=<pid>)`, so one pid ends up
    under one name and the chart shows EngineCore holding the memory.
    """
    changed = 0
    with write_transaction(db):
        for pid, name in names_by_pid.items():
            label = f"{name}:{int(pid)}"
            cur = db.execute(
                "update samples set label = ? where run_id = ? and label like ? and label != ?",
                [label, run_id, f"%:{int(pid)}", label],
            )
            changed += cur.rowcount
    return changed


def create_search(db: Database, **fields: Any) -> int:
    """A search's row (tuning.decide.search.record); returns its id."""
    fields.setdefault("created_at", now_iso())
    fields.setdefault("status", Status.QUEUED.value)
    table = db.table("searches")
    with write_transaction(db):
        table.insert(_encode(fields))
    if table.last_pk is None:
        raise StoreError("no id for the new searches row")
    return int(table.last_pk)


def update_search(db: Database, search_id: int, **fields: Any) -> None:
    with write_transaction(db):
        db.table("searches").update(search_id, _encode(fields))


def create_plan(db: Database, **fields: Any) -> int:
    """A tuning plan's row (tuning.decide.search.plan_record), with a fresh uid; returns its id."""
    fields.setdefault("created_at", now_iso())
    fields.setdefault("status", Status.QUEUED.value)
    return _insert(db, "plans", fields)


def update_plan(db: Database, plan_id: int, **fields: Any) -> None:
    with write_transaction(db):
        db.table("plans").update(plan_id, _encode(fields))


def save_workload(
    db: Database, name: str, spec: dict[str, Any], spec_fingerprint: str, **fields: Any
) -> int:
    """Create or replace the named workload (a spec to reuse across experiments); returns its id."""
    if not name.strip():
        raise StoreError("a named workload needs a name")
    now = now_iso()
    row = {"name": name, "spec_json": spec, "spec_fingerprint": spec_fingerprint, **fields}
    with write_transaction(db):
        found = list(db.execute("select id from workloads where name = ?", [name]))
        if found:
            db.table("workloads").update(found[0][0], _encode({**row, "updated_at": now}))
            return int(found[0][0])
        table = db.table("workloads")
        table.insert(_encode({**row, "created_at": now, "updated_at": now}))
        if table.last_pk is None:
            raise StoreError("no id for the new workloads row")
        return int(table.last_pk)


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
