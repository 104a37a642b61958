"""One stored run as an llm-d Benchmark Report v0.2.1 (PyPI `llmd-benchmark-report`), a plain
dict: `run` (uid = the run's uid, eid = its experiment's uid), `scenario.stack` (the engine: vLLM
version, model, accelerator, the exact flags in `native.args`, `cfg_id` a hash of them),
`scenario.load` (the lab's load generator and its workload), `results.request_performance`
(requests, throughput, latency in seconds, from the run's summary: vLLM's TPOT is
`time_per_output_token`, vLLM's ITL `inter_token_latency`). Repeats and verdicts have no field:
`run.eid` groups an experiment's runs. The package validates it in the tests; the lab does not
need it to write one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

VERSION = "0.2.1"
TOOL = "vllm-tuning-lab"
# lab metric -> Benchmark Report latency field, and its unit
_LATENCY = {
    "ttft": ("time_to_first_token", "s"),
    "tpot": ("time_per_output_token", "s/token"),
    "itl": ("inter_token_latency", "s/token"),
    "e2el": ("request_latency", "s"),
}
_STATS = {"mean": "mean", "median": "p50", "p90": "p90", "p99": "p99", "std": "stddev"}


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value == value and abs(value) != float("inf") else None


def _latency(summary: Mapping[str, Any], key: str, unit: str) -> dict[str, Any] | None:
    out: dict[str, Any] = {"units": unit}
    for ours, theirs in _STATS.items():
        v = _num(summary.get(f"{ours}_{key}_ms"))
        if v is not None:
            out[theirs] = v / 1000.0
    return out if "mean" in out else None


def _rate(value: Any, unit: str) -> dict[str, Any] | None:
    v = _num(value)
    return None if v is None else {"units": unit, "mean": v}


def _args(run: Mapping[str, Any]) -> dict[str, Any]:
    """The flags as `--name: value` (a switch's value is null), the run's whole configuration."""
    out: dict[str, Any] = {}
    for name, value in sorted((run.get("config") or {}).items()):
        out[f"--{name}"] = None if value is True else value
    return out


def _cfg_id(args: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(args, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _seq_len(mean: float | None) -> dict[str, Any]:
    return {"distribution": "other" if mean is None else "fixed", "value": mean or 0}


def _iso(value: Any) -> str | None:
    """An ISO-8601 time as stored, or None for text that is not one."""
    try:
        return datetime.fromisoformat(str(value)).isoformat() if value else None
    except ValueError:
        return None


def _time(run: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ours, theirs in (("started_at", "start"), ("finished_at", "end")):
        if (iso := _iso(run.get(ours))) is not None:
            out[theirs] = iso
    duration = _num((run.get("summary") or {}).get("duration"))
    if duration is not None:
        out["duration"] = f"PT{duration}S"
    return out


def benchmark_report(run: Mapping[str, Any], experiment_uid: str | None = None) -> dict[str, Any]:
    """The Benchmark Report v0.2.1 of one stored run (a row as store.queries returns it)."""
    summary: Mapping[str, Any] = run.get("summary") or {}
    workload: Mapping[str, Any] = run.get("workload") or {}
    args = _args(run)
    completed = int(_num(summary.get("completed")) or 0)
    failed = int(_num(summary.get("failed")) or 0)
    mean_in = (_num(summary.get("total_input_tokens")) or 0) / completed if completed else None
    mean_out = (_num(summary.get("total_output_tokens")) or 0) / completed if completed else None
    engine = {
        "metadata": {"schema_version": "0.0.1", "label": "vllm-0", "cfg_id": _cfg_id(args)},
        "standardized": {
            "kind": "inference_engine",
            "tool": "vllm",
            "tool_version": str(run.get("vllm_version") or "unknown"),
            "role": "replica",
            "replicas": 1,
            "model": {"name": str(run.get("model") or "unknown")},
            "accelerator": {
                "model": str(run.get("gpu_model") or run.get("hardware") or "unknown"),
                "count": 1,
                "parallelism": {"tp": int(_num(args.get("--tensor-parallel-size")) or 1)},
            },
        },
        "native": {"args": args},
    }
    concurrency = _num(workload.get("concurrency"))
    load = {
        "metadata": {
            "schema_version": "0.0.1",
            "cfg_id": str(run.get("workload_fingerprint") or ""),
        },
        "standardized": {
            "tool": TOOL
            if not str(run.get("origin") or "").startswith("file:")
            else str(run["origin"])[5:],
            "tool_version": "0.1.0",
            "source": "random",
            "input_seq_len": _seq_len(mean_in),
            "output_seq_len": _seq_len(mean_out),
            **({"concurrency": int(concurrency)} if concurrency and concurrency >= 1 else {}),
        },
        "native": {"config": dict(workload)},
    }
    latency = {f: s for k, (f, u) in _LATENCY.items() if (s := _latency(summary, k, u))}
    throughput = {
        k: v
        for k, v in {
            "output_token_rate": _rate(summary.get("output_throughput"), "tokens/s"),
            "total_token_rate": _rate(summary.get("total_token_throughput"), "tokens/s"),
            "request_rate": _rate(summary.get("request_throughput"), "queries/s"),
        }.items()
        if v is not None
    }
    requests: dict[str, Any] = {"total": completed + failed, "failures": failed}
    return {
        "version": VERSION,
        "run": {
            "uid": str(run.get("uid") or run.get("id")),
            **({"eid": experiment_uid} if experiment_uid else {}),
            "time": _time(run),
            "description": f"{run.get('param')} = {run.get('value')}"
            + (
                f" (imported: {run['origin']})"
                if str(run.get("origin") or "").startswith("file:")
                else ""
            ),
        },
        "scenario": {"stack": [engine], "load": load},
        "results": {
            "request_performance": {
                "aggregate": {"requests": requests, "throughput": throughput, "latency": latency}
            }
        },
    }
