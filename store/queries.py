"""Every read of the lab's tables but a run's telemetry (store.timeseries): experiments, searches,
tuning plans, runs, per-request rows and workloads.

Pages, the runner, the CLI and the exports read through these functions only; loaders for the
dashboard select just the columns it needs, so a compare of 20 runs in a database of 1,000 runs and
a million request rows stays fast. Rows come back as dicts with their *_json columns parsed.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlite_utils import Database

from core.records import RequestRecord
from core.status import ACTIVE
from store.db import StoreError
from store.json_shapes import fits
from store.schema import JSON_COLUMNS, SUMMARY_COLUMNS


def _marks(items: Iterable[Any]) -> str:
    return ",".join("?" * len(list(items)))


def decode(row: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A row with its *_json columns parsed, under the name without the suffix; a value that is
    not JSON, or not of its column's shape (store.json_shapes), reads as None, so one bad row
    never breaks a listing."""
    if row is None:
        return None
    out = dict(row)
    for key in JSON_COLUMNS:
        if key in out:
            raw = out[key]
            # `hardware` is already the comparable summary string; its details go to hardware_info.
            name = key[:-5] if key[:-5] not in row else key[:-5] + "_info"
            try:
                value = json.loads(raw) if isinstance(raw, str) and raw else None
            except (ValueError, RecursionError):
                value = None
            out[name] = value if fits(key, value) else None
    return out


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
            f"select * from experiments where status in ({_marks(ACTIVE)}) order by id",
            sorted(ACTIVE),
        )
    ]


def cancel_requested(db: Database, experiment_id: int) -> bool:
    row = db.execute(
        "select cancel_requested from experiments where id = ?", [experiment_id]
    ).fetchone()
    return bool(row and row[0])


def get_search(db: Database, search_id: int) -> dict[str, Any]:
    tables = db.table_names()
    rows = (
        list(db.query("select * from searches where id = ?", [search_id]))
        if "searches" in tables
        else []
    )
    if not rows:
        raise StoreError(f"no search {search_id}")
    return decode(rows[0]) or {}


def list_searches(db: Database, active_only: bool = False) -> list[dict[str, Any]]:
    """Searches, newest first (only the queued or running ones with active_only); none in a lab
    that predates them."""
    if "searches" not in db.table_names():
        return []
    where, params = "", []
    if active_only:
        where, params = f"where status in ({_marks(ACTIVE)})", sorted(ACTIVE)
    return [
        decode(r) or {}
        for r in db.query(f"select * from searches {where} order by id desc", params)
    ]


def search_experiment_ids(db: Database, name_prefix: str) -> list[int]:
    """The experiments whose name starts with the prefix (a search's steps), oldest first."""
    return [
        int(r[0])
        for r in db.execute(
            "select id from experiments where substr(name, 1, ?) = ? order by id",
            [len(name_prefix), name_prefix],
        )
    ]


def workload_fingerprints(db: Database) -> list[tuple[str, int]]:
    """Each workload fingerprint of finished, shown runs and how many runs replayed it."""
    return [
        (str(r[0]), int(r[1]))
        for r in db.execute(
            "select workload_fingerprint, count(*) from runs where status = 'done' "
            "and coalesce(hidden, 0) = 0 and workload_fingerprint is not null "
            "group by workload_fingerprint order by count(*) desc, max(id) desc"
        )
    ]


def workload_runs(db: Database, fingerprint: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """Chosen plain columns of the finished, shown runs that replayed this workload, oldest first
    (a trade-off view reads a few numbers of every run: thousands in a big lab)."""
    cols = ", ".join(dict.fromkeys(["id", *columns]))
    return [
        dict(r)
        for r in db.query(
            f"select {cols} from runs where workload_fingerprint = ? and status = 'done' "
            "and coalesce(hidden, 0) = 0 order by id",
            [fingerprint],
        )
    ]


def get_run(db: Database, run_id: int) -> dict[str, Any]:
    rows = list(db.query("select * from runs where id = ?", [run_id]))
    if not rows:
        raise StoreError(f"no run {run_id}")
    return decode(rows[0]) or {}


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


def get_requests(db: Database, run_id: int) -> list[RequestRecord]:
    out = []
    for r in db.execute(
        "select idx, start_s, ttft_s, end_s, itl_json, prompt_tokens, "
        "output_tokens, ok, http_status, error, error_kind, conversation, turn, "
        "dispatch_lag_s from requests "
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
                conversation=r[11],
                turn=r[12],
                dispatch_lag=r[13],
            )
        )
    return out


def get_workload(db: Database, name: str) -> dict[str, Any] | None:
    """The named workload (its spec parsed under `spec`), or None."""
    rows = list(db.query("select * from workloads where name = ?", [name]))
    return decode(rows[0]) if rows else None


def list_workloads(db: Database) -> list[dict[str, Any]]:
    return [decode(r) or {} for r in db.query("select * from workloads order by name")]


RUN_COLUMNS: tuple[str, ...] = (
    "id",
    "uid",
    "experiment_id",
    "seq",
    "repeat_index",
    "param",
    "value",
    "config_json",
    "workload_json",
    "workload_spec_json",  # a data file's or trace's name: the context charts and reports carry
    "workload_fingerprint",
    "engine",
    "vllm_version",
    "model",
    "backend",
    "hardware",
    "status",
    "phase",
    "failure_kind",
    "failure_reason",
    "failure_hint",
    "started_at",
    "finished_at",
    "time_to_healthy_s",
    "kv_cache_tokens",
    "kv_cache_memory_bytes",
    "max_concurrency",
    "summary_json",
    "health_json",
    "startup_json",  # its `anatomy`: Compare's server-start rows
    "anatomy_json",  # where the run's wall time went (tuning.experiment.run_anatomy)
    "effective_config_json",
    "config_mismatch_json",
    "reused_from_json",
    "node_id",
    "node_host",
    "gpu_model",
    "slot",
    "author",
    "host",
    "origin",  # `file:<tool>`: imported from a result file (its fingerprint is incomplete)
    "notes",
    "tags",
    "hidden",
    *SUMMARY_COLUMNS,
)


def load_runs(db: Database, run_ids: Iterable[int]) -> list[dict[str, Any]]:
    """The runs in the order given, without log tails or argv (StoreError for a missing id)."""
    ids = [int(i) for i in run_ids]
    if not ids:
        return []
    have = db.table("runs").columns_dict  # a DB opened read-only may predate a migration
    cols = ", ".join(c for c in RUN_COLUMNS if c in have)
    marks = ",".join("?" * len(ids))
    found = {
        r["id"]: decode(r) or {}
        for r in db.query(f"select {cols} from runs where id in ({marks})", ids)
    }
    missing = [i for i in ids if i not in found]
    if missing:
        raise StoreError(f"no run {', '.join(map(str, missing))}")
    return [found[i] for i in ids]


def experiment_run_ids(db: Database, experiment_id: int) -> list[int]:
    return [
        int(r[0])
        for r in db.execute(
            "select id from runs where experiment_id = ? order by seq, id", [experiment_id]
        )
    ]


def request_rows(db: Database, run_id: int, with_itl: bool = False) -> list[dict[str, Any]]:
    """A run's request rows as the metrics code reads them; without ITL unless asked."""
    itl_col = "itl_json" if with_itl else "null"
    rows = db.execute(
        f"select start_s, ttft_s, end_s, output_tokens, prompt_tokens, ok, error_kind, {itl_col} "
        "from requests where run_id = ? order by idx",
        [run_id],
    ).fetchall()
    return [
        {
            "start": r[0],
            "ttft": r[1],
            "end": r[2],
            "output_tokens": r[3],
            "prompt_tokens": r[4],
            "ok": r[5],
            "error_kind": r[6],
            "itl": json.loads(r[7]) if r[7] else [],
        }
        for r in rows
    ]


HISTORY_COLUMNS: tuple[str, ...] = (
    "id",
    "experiment_id",
    "seq",
    "repeat_index",
    "param",
    "value",
    "status",
    "failure_kind",
    "engine",
    "vllm_version",
    "model",
    "hardware",
    "output_throughput",
    "mean_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "peak_tree_rss_bytes",
    "peak_gpu_tree_bytes",
    "peak_kv_cache_usage_perc",
    "kv_cache_tokens",
    "preemptions",
    "failed",
    "author",
    "host",
    "origin",
    "notes",
    "tags",
    "hidden",
    "started_at",
    "finished_at",
)


def history_rows(db: Database, include_hidden: bool = True) -> list[dict[str, Any]]:
    """Every run for the History page: headline columns only (no JSON, no log tail), with its
    experiment's name, newest first."""
    cols = ", ".join(f"r.{c}" for c in HISTORY_COLUMNS)
    where = "" if include_hidden else "where coalesce(r.hidden, 0) = 0"
    return [
        dict(r)
        for r in db.query(
            f"select {cols}, e.name as experiment_name from runs r left join experiments e "
            f"on e.id = r.experiment_id {where} order by r.id desc"
        )
    ]


def runs_by_id(db: Database, run_ids: Sequence[int], columns: Sequence[str]) -> dict[int, dict]:
    """Chosen columns of some runs, by id (the report's per-run details)."""
    ids = [int(i) for i in run_ids]
    if not ids:
        return {}
    return {
        int(r["id"]): dict(r)
        for r in db.query(
            f"select {', '.join(['id', *columns])} from runs where id in ({_marks(ids)})", ids
        )
    }


def present_uids(db: Database, table: str, uids: Iterable[str]) -> set[str]:
    """Which of these experiment or run uids the lab already holds (a team listing's
    'already imported')."""
    wanted = list(dict.fromkeys(uids))
    out: set[str] = set()
    for i in range(0, len(wanted), 500):
        part = wanted[i : i + 500]
        out |= {
            r[0]
            for r in db.execute(f'select uid from "{table}" where uid in ({_marks(part)})', part)
        }
    return out


def reusable_runs(db: Database, exclude_experiment_id: int | None = None) -> list[dict[str, Any]]:
    """Measured runs (done, with a summary, not hidden) outside one experiment: what an experiment
    with the same fingerprint may count instead of measuring again (tuning.experiment.reuse)."""
    rows = db.query(
        "select * from runs where status = 'done' and summary_json is not null "
        "and coalesce(hidden, 0) = 0 and coalesce(experiment_id, -1) != ? order by id",
        [-1 if exclude_experiment_id is None else int(exclude_experiment_id)],
    )
    return [decode(r) or {} for r in rows]


def run_ids_by_uid(db: Database, uids: Iterable[str]) -> dict[str, int]:
    """uid -> id of the runs of these uids that the lab holds."""
    wanted = list(dict.fromkeys(uids))
    out: dict[str, int] = {}
    for i in range(0, len(wanted), 500):
        part = wanted[i : i + 500]
        rows = db.execute(f"select uid, id from runs where uid in ({_marks(part)})", part)
        out.update({str(uid): int(rid) for uid, rid in rows})
    return out


# --- tuning plans (m013_plans; none in a lab that predates them) ---------------------------


def get_plan(db: Database, plan_id: int) -> dict[str, Any]:
    """The plan's row, its JSON parsed (StoreError: no such plan)."""
    rows = (
        list(db.query("select * from plans where id = ?", [plan_id]))
        if "plans" in db.table_names()
        else []
    )
    if not rows:
        raise StoreError(f"no plan {plan_id}")
    return decode(rows[0]) or {}


def list_plans(db: Database, active_only: bool = False) -> list[dict[str, Any]]:
    """Plans, newest first (only the running ones with active_only)."""
    if "plans" not in db.table_names():
        return []
    where, params = "", []
    if active_only:
        where, params = f"where status in ({','.join('?' * len(ACTIVE))})", sorted(ACTIVE)
    return [
        decode(r) or {} for r in db.query(f"select * from plans {where} order by id desc", params)
    ]


def plan_id_for_key(db: Database, key: str) -> int | None:
    """The newest plan row with this key (a resumed plan reuses it), None when there is none."""
    if "plans" not in db.table_names():
        return None
    row = db.execute(
        "select id from plans where key = ? order by id desc limit 1", [key]
    ).fetchone()
    return None if row is None else int(row[0])
