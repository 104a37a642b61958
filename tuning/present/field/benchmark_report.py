"""One stored run as an llm-d Benchmark Report v0.2.1 (PyPI `llmd-benchmark-report`), a plain
dict: `run` (uid = the run's uid, eid = its experiment's uid), `scenario.stack` (the engine: vLLM
version, model, accelerator, the exact flags in `native.args`, `cfg_id` a hash of them),
`scenario.load` (the lab's load generator and its workload), `results.request_performance`
(requests, throughput, latency in seconds, from the run's summary: vLLM's TPOT is
`time_per_output_token`, vLLM's ITL `inter_token_latency`), and where the run has them its KV
cache and its start: `results.observability.components[].aggregate.kv_cache_usage` (a fraction:
the mean over its samples, the peak as `max`), `pod_startup_times` (the one server's time to
healthy) and the KV capacity in tokens, which has no standardized slot, in the engine's
`native.config`. The load's `tool_version` is the lab's own version, given by the caller (its
package metadata). Repeats and verdicts have no field: `run.eid` groups an experiment's runs. The
package validates it in the tests; the lab does not need it to write one."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

VERSION = "0.2.1"
TOOL = "vllm-tuning-lab"
LABEL = "vllm-0"  # the engine's label in the stack; observability names it
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


def _observability(run: Mapping[str, Any], kv_mean: float | None) -> dict[str, Any] | None:
    """The run's KV-cache usage (mean over its samples, its stored peak as max: both a fraction
    0..1, as vLLM's gauge) and its time to healthy as the one server's startup; None without
    either."""
    out: dict[str, Any] = {}
    mean, peak = _num(kv_mean), _num(run.get("peak_kv_cache_usage_perc"))
    if mean is not None:  # the schema needs a mean: a peak alone has no slot
        usage = {"units": "fraction", "mean": mean, **({"max": peak} if peak is not None else {})}
        out["components"] = [{"component_label": LABEL, "aggregate": {"kv_cache_usage": usage}}]
    healthy = _num(run.get("time_to_healthy_s"))
    if healthy is not None and healthy >= 0:
        pod = {"name": LABEL, "model": str(run.get("model") or "unknown")}
        out["pod_startup_times"] = {
            "pods": [{**pod, "startup_seconds": healthy}],
            "aggregate": {"units": "s", "mean": healthy, "min": healthy, "max": healthy},
        }
    return out or None


def benchmark_report(
    run: Mapping[str, Any],
    experiment_uid: str | None = None,
    *,
    tool_version: str = "unknown",
    kv_mean: float | None = None,
) -> dict[str, Any]:
    """The Benchmark Report v0.2.1 of one stored run (a row as store.queries returns it);
    `tool_version` the lab's version, `kv_mean` the mean of its KV-cache usage samples."""
    summary: Mapping[str, Any] = run.get("summary") or {}
    workload: Mapping[str, Any] = run.get("workload") or {}
    args = _args(run)
    completed = int(_num(summary.get("completed")) or 0)
    failed = int(_num(summary.get("failed")) or 0)
    mean_in = (_num(summary.get("total_input_tokens")) or 0) / completed if completed else None
    mean_out = (_num(summary.get("total_output_tokens")) or 0) / completed if completed else None
    capacity = run.get("kv_cache_tokens")  # what the engine said it allocated, in tokens
    imported = str(run.get("origin") or "").startswith("file:")
    engine = {
        "metadata": {"schema_version": "0.0.1", "label": LABEL, "cfg_id": _cfg_id(args)},
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
        "native": {
            "args": args,
            **({"config": {"kv_cache_tokens": int(kv)}} if (kv := _num(capacity)) else {}),
        },
    }
    concurrency = _num(workload.get("concurrency"))
    load = {
        "metadata": {
            "schema_version": "0.0.1",
            "cfg_id": str(run.get("workload_fingerprint") or ""),
        },
        "standardized": {
            "tool": str(run["origin"])[5:] if imported else TOOL,
            "tool_version": "unknown" if imported else tool_version,  # another tool's load
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
            + (f" (imported: {run['origin']})" if imported else ""),
        },
        "scenario": {"stack": [engine], "load": load},
        "results": {
            "request_performance": {
                "aggregate": {"requests": requests, "throughput": throughput, "latency": latency}
            },
            **({"observability": seen} if (seen := _observability(run, kv_mean)) else {}),
        },
    }
