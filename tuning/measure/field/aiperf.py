"""AIPerf's `profile_export_aiperf.json` (one key per metric: unit, avg, p50/p90/p99, std, count)
and, beside it, the per-request `profile_export.jsonl`, read as one lab run.

The metric traps: AIPerf's `inter_chunk_latency` is vLLM's ITL (every gap between chunks) and
its `inter_token_latency` is vLLM's TPOT. From the per-request rows the lab recomputes both by its
own formulas, with token counts from the server's usage (`usage_completion_tokens`) where AIPerf
has it: AIPerf's `output_sequence_length` counts tokens with the client's tokenizer, which need
not be the server's. Only the profiling phase's requests count (warm-ups are left out); unknown
fields are ignored (the schema moves)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.json_depth import TooDeep, loads
from core.plausible import count, number
from core.records import RequestRecord
from tuning.measure.field.run import FieldError, FieldRun, items, obj
from tuning.measure.metrics import summarize

TOOL = "aiperf"
MAX_LINE = 4 * 1024 * 1024
MAX_LINES = 1_000_000
# lab metric -> AIPerf metric (both in ms)
_METRICS = {
    "ttft": "time_to_first_token",
    "tpot": "inter_token_latency",  # vLLM's TPOT
    "itl": "inter_chunk_latency",  # vLLM's ITL
    "e2el": "request_latency",
}


def is_aiperf(doc: Any) -> bool:
    return isinstance(doc, Mapping) and (
        "aiperf_version" in doc or ("schema_version" in doc and "request_latency" in doc)
    )


def _value(metrics: Mapping[str, Any], name: str) -> Any:
    return obj(metrics.get(name)).get("value")


def _record(i: int, row: Mapping[str, Any], t0: int) -> RequestRecord:
    meta, metrics = obj(row.get("metadata")), obj(row.get("metrics"))
    start = (count(meta.get("request_start_ns")) or t0) - t0
    err = row.get("error")
    ttft = number(_value(metrics, "time_to_first_token"))
    latency = number(_value(metrics, "request_latency"))
    ok = not err and ttft is not None and latency is not None
    raw = (number(x) for x in items(_value(metrics, "inter_chunk_latency")))
    gaps = [g / 1000.0 for g in raw if g is not None]
    out_tokens = count(_value(metrics, "usage_completion_tokens"))
    if out_tokens is None:
        out_tokens = count(_value(metrics, "output_sequence_length"))
    in_tokens = count(_value(metrics, "usage_prompt_tokens"))
    if in_tokens is None:
        in_tokens = count(_value(metrics, "input_sequence_length"))
    return RequestRecord(
        index=i,
        start=start / 1e9,
        ttft=(ttft or 0.0) / 1000.0 if ok else None,
        end=start / 1e9 + (latency or 0.0) / 1000.0 if ok else None,
        itl=gaps if ok else [],
        prompt_tokens=in_tokens,
        output_tokens=out_tokens if ok else None,
        ok=ok,
        error=None if ok else json.dumps(err, default=str)[:500] if err else "no timing",
        error_kind=None if ok else "error",
    )


def read_profile_jsonl(path: Path) -> list[RequestRecord]:
    """The profiling phase's requests of a profile_export.jsonl, bounded per line and in lines."""
    rows: list[Mapping[str, Any]] = []
    with path.open("rb") as f:
        for n, line in enumerate(f):
            if n >= MAX_LINES or len(line) > MAX_LINE:
                raise FieldError(f"{path}: line {n + 1} over the bounds of a per-request export")
            if not line.strip():
                continue
            try:
                row = loads(line.decode("utf-8"))
            except (ValueError, TooDeep, UnicodeDecodeError):
                raise FieldError(f"{path}: line {n + 1} is not JSON") from None
            phase = obj(obj(row).get("metadata")).get("benchmark_phase")
            if isinstance(row, Mapping) and phase in (None, "profiling"):
                rows.append(row)
    starts = [count(obj(r.get("metadata")).get("request_start_ns")) for r in rows]
    t0 = min((s for s in starts if s is not None), default=0)
    rows.sort(key=lambda r: count(obj(r.get("metadata")).get("request_start_ns")) or t0)
    return [_record(i, r, t0) for i, r in enumerate(rows)]


def _aggregate(doc: Mapping[str, Any], duration: float) -> dict[str, Any]:
    def stat(name: str, key: str) -> float | None:
        return number(obj(doc.get(name)).get(key))

    out: dict[str, Any] = {
        "duration": duration,
        "completed": count(stat("completed_request_count", "avg") or stat("request_count", "avg")),
        "request_throughput": stat("request_throughput", "avg"),
        "output_throughput": stat("output_token_throughput", "avg"),
        "total_token_throughput": stat("total_token_throughput", "avg"),
        "total_output_tokens": count(stat("total_output_tokens", "avg")),
    }
    for lab, name in _METRICS.items():
        for ours, theirs in (("mean", "avg"), ("median", "p50"), ("p90", "p90"), ("p99", "p99")):
            out[f"{ours}_{lab}_ms"] = stat(name, theirs)
    return {k: v for k, v in out.items() if v is not None}


def read_aiperf(doc: Mapping[str, Any], jsonl: Path | None) -> FieldRun:
    """The run of one AIPerf profile (per request from `jsonl` when given)."""
    duration = number(obj(doc.get("benchmark_duration")).get("avg")) or 0.0
    records = read_profile_jsonl(jsonl) if jsonl is not None else None
    records = records or None
    summary = (
        summarize(records, duration) if records and duration > 0 else _aggregate(doc, duration)
    )
    config = obj(doc.get("input_config"))
    names = [obj(m).get("name") for m in items(obj(config.get("models")).get("items"))]
    phases = [obj(p) for p in items(config.get("phases"))]
    profiling = next((p for p in phases if p.get("kind") == "profiling"), {})
    workload = {"concurrency": count(profiling.get("concurrency")),
                "request_rate": number(profiling.get("request_rate"))}  # fmt: skip
    start = doc.get("start_time")
    return FieldRun(
        tool=TOOL,
        tool_version=str(doc["aiperf_version"]) if doc.get("aiperf_version") else None,
        label="profile_export_aiperf.json",
        summary=summary,
        records=records,
        model=str(names[0]) if names and isinstance(names[0], str) else None,
        workload={k: v for k, v in workload.items() if v is not None},
        started_at=str(start) if isinstance(start, str) else None,
    )
