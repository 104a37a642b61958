"""The lab's SQLite schema as sqlite-utils migrations; the migration table is the schema version.

Table and column names are written to read well in Datasette: plain words, units in the name
(`_ms`, `_s`, `_bytes`, `_perc`), one row per thing.
"""

from __future__ import annotations

import uuid

from sqlite_utils import Database, Migrations

from core.clock import now_iso
from store.backfill import backfill_chunks

migrations = Migrations("vllm-tuning-lab")

# Summary metrics kept as real columns (the rest stays in summary_json) so lists, filters and the
# compare page never parse JSON for 1,000 runs.
LATENCY_KEYS = [
    f"{stat}_{metric}_ms"
    for metric in ("ttft", "tpot", "itl", "e2el")
    for stat in ("mean", "median", "p90", "p99")
]
SUMMARY_COLUMNS: dict[str, type] = {
    "completed": int,
    "failed": int,
    "duration": float,
    "total_input_tokens": int,
    "total_output_tokens": int,
    "request_throughput": float,
    "output_throughput": float,
    "total_token_throughput": float,
    **{k: float for k in LATENCY_KEYS},
    **{f"{stat}_itl_per_token_ms": float for stat in ("mean", "median", "p90", "p99")},
    "mean_tokens_per_chunk": float,
    "peak_tree_rss_bytes": int,
    "peak_gpu_used_bytes": int,
    "peak_gpu_tree_bytes": int,
    "peak_kv_cache_usage_perc": float,
    "preemptions": int,
    "prefix_cache_hit_rate": float,
    "achieved_concurrency": float,
    "steady_output_throughput": float,
    "client_bound": int,
}

# Columns holding JSON text; reads return each parsed under the name without `_json`.
JSON_COLUMNS: tuple[str, ...] = (
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
    "itl_json",
    "effective_config_json",
    "config_mismatch_json",
    "repeats_plan_json",
    "prediction_json",
    "workload_spec_json",
    "spec_json",
    "fleet_json",
    "placement_json",
    "result_json",
    "gpu_uuids_json",
    "reused_from_json",
    "engine_identity_json",
    "anatomy_json",
    "estimate_json",
    "guards_json",
    "decision_json",
    "resident_json",
)

# Who made a row and where, where it came from (local or a bundle), and the user's own marks:
# the same on experiments and runs.
PROVENANCE_COLUMNS: dict[str, type] = {
    "author": str,
    "host": str,
    "origin": str,
    "notes": str,
    "tags": str,
    "hidden": int,
}


def add_missing_columns(db: Database, table: str, columns: dict[str, type]) -> None:
    """Add each column the table lacks (a migration that ran halfway runs again cleanly)."""
    existing = db.table(table).columns_dict
    for column, kind in columns.items():
        if column not in existing:
            db.table(table).add_column(column, kind)


@migrations()
def m001_initial(db: Database) -> None:
    db.table("experiments").create(
        {
            "id": int,
            "uid": str,
            "name": str,
            "param": str,
            "values_json": str,
            "repeats": int,
            "config_json": str,
            "workload_json": str,
            "engine_json": str,
            "base_url": str,
            "model": str,
            "status": str,
            "phase": str,
            "current_run_id": int,
            "runs_done": int,
            "runs_total": int,
            "requests_done": int,
            "requests_total": int,
            "runner_pid": int,
            "heartbeat_at": str,
            "cancel_requested": int,
            "error": str,
            "created_at": str,
            "started_at": str,
            "finished_at": str,
            **PROVENANCE_COLUMNS,
        },
        pk="id",
        not_null={"uid"},
        defaults={
            "cancel_requested": 0,
            "hidden": 0,
            "runs_done": 0,
            "requests_done": 0,
            "origin": "local",
        },
    )
    db.table("experiments").create_index(["uid"], unique=True)
    db.table("runs").create(
        {
            "id": int,
            "uid": str,
            "experiment_id": int,
            "seq": int,
            "repeat_index": int,
            "param": str,
            "value": str,
            "config_json": str,
            "argv_json": str,
            "env_json": str,
            "workload_json": str,
            "workload_fingerprint": str,
            "engine": str,
            "vllm_version": str,
            "model": str,
            "backend": str,
            "hardware": str,
            "hardware_json": str,
            "base_url": str,
            "status": str,
            "phase": str,
            "failure_kind": str,
            "failure_reason": str,
            "failure_hint": str,
            "started_at": str,
            "finished_at": str,
            "time_to_healthy_s": float,
            "kv_cache_tokens": int,
            "kv_cache_memory_bytes": int,
            "max_concurrency": float,
            "block_size": int,
            "weights_memory_gib": float,
            "startup_json": str,
            "server_pid": int,
            "log_path": str,
            "log_tail": str,
            "summary_json": str,
            "health_json": str,
            **SUMMARY_COLUMNS,
            **PROVENANCE_COLUMNS,
        },
        pk="id",
        foreign_keys=[("experiment_id", "experiments", "id")],
        not_null={"uid"},
        defaults={"hidden": 0, "origin": "local"},
    )
    db.table("runs").create_index(["uid"], unique=True)
    db.table("runs").create_index(["experiment_id", "seq"])
    db.table("requests").create(
        {
            "run_id": int,
            "idx": int,
            "start_s": float,
            "ttft_s": float,
            "end_s": float,
            "itl_json": str,
            "prompt_tokens": int,
            "output_tokens": int,
            "ok": int,
            "http_status": int,
            "error": str,
            "error_kind": str,
        },
        pk=("run_id", "idx"),
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("samples").create(
        {
            "run_id": int,
            "t_s": float,
            "series": str,
            "label": str,
            "value": float,
        },
        foreign_keys=[("run_id", "runs", "id")],
    )
    db.table("samples").create_index(["run_id", "series", "t_s"])


@migrations()
def m002_effective_config(db: Database) -> None:
    """What the engine said it runs with (effective_config_json) and each asked parameter it did
    not apply (config_mismatch_json: a list, empty when all applied; NULL when not checked)."""
    add_missing_columns(db, "runs", {"effective_config_json": str, "config_mismatch_json": str})


@migrations()
def m003_auto_repeats(db: Database) -> None:
    """Repeat until decided (`experiment --repeats auto`): the flag, its limits (max repeats a
    value, the time budget in minutes) and the stopping rule's last plan (repeats_plan_json)."""
    columns = {
        "repeats_auto": int,
        "max_repeats": int,
        "budget_minutes": float,
        "repeats_plan_json": str,
    }
    add_missing_columns(db, "experiments", columns)


@migrations()
def m004_kv_prediction(db: Database) -> None:
    """The KV cache tuning.engine.predict expected for a run, stored beside the engine's own figures
    (kv_cache_tokens, max_concurrency): predicted_kv_cache_tokens, predicted_max_concurrency and
    the whole prediction (prediction_json: budget, its source, blocks, problems)."""
    columns = {
        "predicted_kv_cache_tokens": int,
        "predicted_max_concurrency": float,
        "prediction_json": str,
    }
    add_missing_columns(db, "runs", columns)


@migrations()
def m005_traffic_workloads(db: Database) -> None:
    """Real traffic (tuning.measure.traffic): the workload spec an experiment and each run replayed
    (workload_spec_json, NULL for the classic fixed-length workload), per request its conversation,
    turn and dispatch lag (actual - planned send, seconds), and named workloads to reuse."""
    for name in ("experiments", "runs"):
        add_missing_columns(db, name, {"workload_spec_json": str})
    add_missing_columns(db, "requests", {"conversation": int, "turn": int, "dispatch_lag_s": float})
    if "workloads" not in db.table_names():
        db.table("workloads").create(
            {
                "id": int,
                "name": str,
                "spec_json": str,
                "spec_fingerprint": str,
                "created_at": str,
                "updated_at": str,
                "author": str,
                "host": str,
            },
            pk="id",
            not_null={"name", "spec_json"},
        )
        db.table("workloads").create_index(["name"], unique=True)


@migrations()
def m006_process_start_times(db: Database) -> None:
    """Each stored pid with its process's start time (seconds since the epoch), so a pid the
    kernel has given to someone else is never taken for the lab's runner or server."""
    add_missing_columns(db, "experiments", {"runner_start_time_s": float})
    add_missing_columns(db, "runs", {"server_start_time_s": float})


@migrations()
def m007_fleet_placement(db: Database) -> None:
    """Where a run ran when an experiment used the fleet (Ray): node, host, GPUs, CPU, slot, which
    attempt; NULL for a local run. `experiments.fleet_json` holds the fleet options it asked for."""
    columns: dict[str, type] = {
        "node_id": str,
        "node_host": str,
        "gpu_uuids_json": str,
        "gpu_model": str,
        "cpu_model": str,
        "slot": str,
        "attempt": int,
        "placement_json": str,
    }
    add_missing_columns(db, "runs", columns)
    if "fleet_json" not in db.table("experiments").columns_dict:
        db.table("experiments").add_column("fleet_json", str)


# A search's row (m008_searches): what, the process running it, how it ended.
SEARCH_COLUMNS: dict[str, type] = {
    "id": int,
    "key": str,
    "param": str,
    "spec_json": str,
    "status": str,
    "runner_pid": int,
    "runner_start_time_s": float,
    "log_path": str,
    "created_at": str,
    "started_at": str,
    "finished_at": str,
    "result_json": str,
    "error": str,
    "author": str,
    "host": str,
}


@migrations()
def m008_searches(db: Database) -> None:
    """One row per `search` (tuning.decide.search.record): what it searches (spec_json: parameter,
    range, objective, SLOs, budget, workload, baseline), the process running it (pid and start
    time, its log), its status and, once ended, its result (result_json). Its steps are ordinary
    experiments named after its `key`."""
    if "searches" not in db.table_names():
        db.table("searches").create(
            SEARCH_COLUMNS, pk="id", not_null={"key", "spec_json", "status"}
        )


@migrations()
def m009_request_prompt_hashes(db: Database) -> None:
    """Per planned request, the sha256 of its prompt text and the text itself (as planned: a later
    turn's earlier answers are placeholders of their length). Bundles carry the hash; the text only
    when exported with include_prompts; reports never read it."""
    add_missing_columns(db, "requests", {"prompt_sha256": str, "prompt_text": str})


@migrations()
def m010_lab_identity(db: Database) -> None:
    """Which lab made an experiment, so that runs join it only from that lab: a random uid for
    this lab (the one-row `lab` table; bundles carry it in their manifest) and, on experiments,
    `lab_uid`: the lab that made it (NULL: this lab for a local experiment, unknown for one
    imported before the column existed)."""
    if "lab" not in db.table_names():
        db.table("lab").create({"uid": str, "created_at": str}, pk="uid", not_null={"uid"})
    if not db.execute("SELECT 1 FROM lab LIMIT 1").fetchone():
        db.execute(
            "INSERT INTO lab (uid, created_at) VALUES (?, ?)",
            [uuid.uuid4().hex, now_iso("seconds")],
        )
    add_missing_columns(db, "experiments", {"lab_uid": str})


@migrations()
def m011_engine_flags(db: Database) -> None:
    """The flags of each engine the lab has read (tuning.engine.flags.catalog): per interpreter
    path and
    vLLM version, the parser's flags as JSON and when they were read. A cache: dropping its rows
    loses nothing but the seconds it takes to read them again."""
    if "engine_flags" not in db.table_names():
        db.table("engine_flags").create(
            {"python": str, "vllm_version": str, "read_at": float, "catalog_json": str},
            pk=("python", "vllm_version"),
            not_null={"python", "vllm_version", "catalog_json"},
        )


@migrations()
def m012_reused_runs(db: Database) -> None:
    """A run counted in an experiment without being measured again (tuning.experiment.reuse):
    `reused_from_json` says which earlier run it copies (its uid, id, experiment, when, by whom,
    from where: this lab or a teammate's bundle); NULL for a run measured for its experiment."""
    add_missing_columns(db, "runs", {"reused_from_json": str})


# A tuning plan's row (m013_plans): what, the process running it, how it ended.
PLAN_COLUMNS: dict[str, type] = {
    "id": int,
    "uid": str,
    "key": str,
    "spec_json": str,
    "status": str,
    "runner_pid": int,
    "runner_start_time_s": float,
    "created_at": str,
    "started_at": str,
    "finished_at": str,
    "result_json": str,
    "error": str,
    "author": str,
    "host": str,
}


@migrations()
def m013_plans(db: Database) -> None:
    """One row per tuning plan (`tuning-lab plan`, tuning.decide.search.plan_record), as a
    search
    has one: its `key` (PlanSpec.key(): a later call with the same arguments resumes, and reuses
    the row), what it searches (spec_json: the parameters in order, their ranges, objective,
    SLOs, budget, workload, start), the process running it, its status and, once ended, its
    result (result_json: run_plan's recommendation, with each search's id). Its searches and
    confirm runs are ordinary search rows, experiments and runs."""
    if "plans" not in db.table_names():
        db.table("plans").create(PLAN_COLUMNS, pk="id", not_null={"key", "spec_json", "status"})
        db.table("plans").create_index(["key"])


@migrations()
def m014_run_engine_identity(db: Database) -> None:
    """Which engine measured a run, as reuse compares it (tuning.engine.identity): the engine
    command, the model with its config's sha256, the served name, the load format, the engine's
    and the inherited environment knobs. NULL on a run written before: such a run is never
    offered for reuse (nothing says which model or command measured it)."""
    add_missing_columns(db, "runs", {"engine_identity_json": str})


@migrations()
def m015_run_anatomy(db: Database) -> None:
    """Where each run's wall time went (tuning.experiment.run_anatomy): `runs.anatomy_json`, its
    named parts from the previous run's end to its own end; on the experiment, the estimate
    printed before it started (`estimate_json`, tuning.experiment.estimate) and its time outside
    its runs (`anatomy_json`: the last server's stop). NULL on rows written before."""
    add_missing_columns(db, "runs", {"anatomy_json": str})
    add_missing_columns(db, "experiments", {"anatomy_json": str, "estimate_json": str})


@migrations()
def m016_chunked_streams(db: Database) -> None:
    """Chunks that carry several tokens (`--stream-interval N`, speculative decoding): each run's
    tokens a chunk (mean_tokens_per_chunk) and ITL per token (mean, median, p90, p99), beside
    vLLM's ITL, which is per chunk. Runs stored before get the two means from their request rows."""
    add_missing_columns(
        db,
        "runs",
        {
            **{f"{s}_itl_per_token_ms": float for s in ("mean", "median", "p90", "p99")},
            "mean_tokens_per_chunk": float,
        },
    )
    backfill_chunks(db)


@migrations()
def m017_decisions(db: Database) -> None:
    """What an experiment decides on and what it decided (issue 37): its declared primary
    metrics, the objective (a metric key; NULL: output throughput) and its guards (guards_json:
    a list of metric keys; NULL: p99 TTFT and p99 TPOT), and the decision record its own rule
    made when it ended (decision_json: tuning.compare.decision.Decision, read by every surface)."""
    columns: dict[str, type] = {"objective": str, "guards_json": str, "decision_json": str}
    add_missing_columns(db, "experiments", columns)


@migrations()
def m018_resident_engines(db: Database) -> None:
    """Resident engines for repeats (issue 38, item 4; tuning.experiment.resident): what the
    experiment asked (`--resident auto|on|off`), whether its repeats switched sleeping servers
    instead of restarting, the KV budget they shared, the check that switched and restarted runs
    give equivalent numbers, and why it fell back to restarts (resident_json). NULL before."""
    add_missing_columns(db, "experiments", {"resident_json": str})


def lab_uid(db: Database) -> str | None:
    """This lab's uid (None for a DB not migrated yet, e.g. an old one opened read-only)."""
    if "lab" not in db.table_names():
        return None
    row = db.execute("SELECT uid FROM lab ORDER BY rowid LIMIT 1").fetchone()
    return str(row[0]) if row else None
