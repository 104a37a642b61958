"""`tuning-lab runs`: every run with its summary, as a table or as JSON (`--json`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from core.failure_kinds import failure_words
from core.status import suspect_reasons
from tuning.cli.args import db_path, printable, refused, say
from tuning.engine.value_text import value_words
from tuning.measure.telemetry.completeness import sample_gaps

RUN_KEYS = (
    [
        "completed",
        "failed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
    ]
    + [
        f"{s}_{m}_ms"
        for m in ("ttft", "tpot", "itl", "e2el")
        for s in ("mean", "median", "p90", "p99")
    ]
    + [
        "peak_tree_rss_bytes",
        "peak_gpu_used_bytes",
        "peak_gpu_tree_bytes",
        "peak_kv_cache_usage_perc",
        "preemptions",
    ]
)
# The numbers the `runs` table shows (besides failed requests).
_RUNS_TABLE = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
# The stored text in a `runs` row: printed through `printable`, so one cell stays one line.
_RUNS_TEXT = ("param", "value", "status")
# Columns of a run row that `runs --json` carries as they are.
RUN_COLUMNS = (
    "id",
    "uid",
    "experiment_id",
    "param",
    "value",
    "status",
    "failure_kind",
    "failure_reason",
    "failure_hint",
    "kv_cache_tokens",
    "time_to_healthy_s",
    "workload_fingerprint",
    "author",
    "host",
    "effective_config",  # what the engine said it ran with (tuning.engine.effective), per flag
    "config_mismatch",  # asked flags it did not apply; [] when all applied, None: not checked
)


def run_as_dict(run: dict[str, Any]) -> dict[str, Any]:
    """A run row as `runs --json` prints it: its facts, then its summary's numbers."""
    summary = run.get("summary") or {}
    out = {key: run.get(key) for key in RUN_COLUMNS}
    out["repeat"] = run.get("repeat_index")
    out["kv_capacity_tokens"] = run.get("kv_cache_tokens")
    out["startup_anatomy"] = (run.get("startup") or {}).get(
        "anatomy"
    )  # tuning.engine.startup_anatomy
    out["anatomy"] = run.get("anatomy")  # where its wall time went (tuning.experiment.run_anatomy)
    out["suspect_reasons"] = suspect_reasons(run)  # why a `suspect` run is not counted; [] else
    health = run.get("health")  # samples lost or thinned ([]: complete, or not recorded)
    out["sample_gaps"] = sample_gaps(health if isinstance(health, dict) else None)
    out.update({key: summary.get(key) for key in RUN_KEYS})
    return out


def runs(args: argparse.Namespace) -> int:
    from store import StoreError, connect, queries
    from tuning.compare.present import fmt

    try:
        with connect(db_path(args), readonly=True) as db:
            if args.experiment is not None:
                queries.get_experiment(db, args.experiment)  # "no experiment 999", exit 1
            runs = queries.list_runs(db, args.experiment, include_hidden=True)
    except StoreError as exc:
        return refused(str(exc))
    rows = [run_as_dict(r) for r in runs]
    if args.json:
        say(json.dumps(rows, indent=2))
        return 0
    say(
        f"{'id':>4} {'exp':>4} {'param':22} {'value':>8} {'status':9} {'tok/s':>9} "
        f"{'TTFT ms':>8} {'TPOT ms':>8} {'fail':>4}"
    )
    for r in rows:
        tps, ttft, tpot = (fmt(r[k], spec="{:.1f}", none="-") for k in _RUNS_TABLE)
        param, value, status = (printable(r[k] or "") for k in _RUNS_TEXT)  # one line each
        kind = printable(failure_words(r["failure_kind"]))  # its words; --json keeps the key
        value = printable(value_words(r["value"] or ""))  # a list value: 1, 2, 4, 8
        say(
            f"{r['id']:>4} {r['experiment_id']:>4} {param:22} {value:>8} "
            f"{status:9} {tps:>9} {ttft:>8} {tpot:>8} {fmt(r['failed'], 'count', none='-'):>4}"
            + (f"  [{kind}]" if kind else "")
            + "".join(f"  [suspect: {printable(why)}]" for why in r["suspect_reasons"])
            + "".join(f"  [{printable(gap)}]" for gap in r["sample_gaps"])
        )
    return 0
