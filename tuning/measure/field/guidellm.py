"""GuideLLM's `benchmarks.json` (GenerativeBenchmarksReport: `metadata`, `config`,
`benchmarks[]`) read as lab runs, one per benchmark.

The metric trap: GuideLLM's `time_per_output_token_ms` is latency over ALL output tokens, TTFT
included; its `inter_token_latency_ms` is vLLM's TPOT ((E2EL - TTFT) / (output tokens - 1)).
So the lab's TPOT comes from the requests' own times (first and last token), which reproduces
the latter, never from the former. GuideLLM keeps no gaps between chunks: the lab's ITL stays
unknown for these runs rather than being guessed. Without per-request rows (a report saved
without them), the distributions' successful `mean/median/p90/p99` are used, TPOT from
`inter_token_latency_ms`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.plausible import count, number
from core.records import RequestRecord
from tuning.measure.field.run import FieldRun, items, obj
from tuning.measure.metrics import summarize

TOOL = "guidellm"
# lab metric -> GuideLLM distribution, and the factor to ms
_DISTRIBUTIONS = {
    "ttft": ("time_to_first_token_ms", 1.0),
    "tpot": ("inter_token_latency_ms", 1.0),  # NOT time_per_output_token_ms (TTFT included)
    "e2el": ("request_latency", 1000.0),
}
_STATS = {"mean": "mean", "median": "median", "p90": "p90", "p99": "p99"}


def is_guidellm(doc: Any) -> bool:
    return (
        isinstance(doc, Mapping)
        and isinstance(doc.get("benchmarks"), list)
        and ("guidellm_version" in obj(doc.get("metadata")) or "config" in doc)
    )


def _record(i: int, r: Mapping[str, Any], t0: float, ok: bool) -> RequestRecord | None:
    start = number(r.get("request_start_time"))
    if start is None:
        return None
    timings = obj(obj(r.get("info")).get("timings"))
    ttft_ms = number(r.get("time_to_first_token_ms"))
    last = number(timings.get("last_token_iteration")) or number(r.get("request_end_time"))
    return RequestRecord(
        index=i,
        start=start - t0,
        ttft=ttft_ms / 1000.0 if ok and ttft_ms is not None else None,
        end=last - t0 if ok and last is not None else None,
        prompt_tokens=count(r.get("prompt_tokens")),
        output_tokens=count(r.get("output_tokens")) if ok else None,
        ok=ok,
        error=None if ok else str(r.get("error") or "errored")[:500],
        error_kind=None if ok else "error",
    )


def _records(bench: Mapping[str, Any]) -> list[RequestRecord] | None:
    reqs = obj(bench.get("requests"))
    rows = [(r, True) for r in items(reqs.get("successful"))]
    rows += [(r, False) for r in items(reqs.get("errored")) + items(reqs.get("incomplete"))]
    rows = [(r, ok) for r, ok in rows if isinstance(r, Mapping)]
    starts = [s for s in (number(r.get("request_start_time")) for r, _ in rows) if s is not None]
    if not starts:
        return None
    t0 = min(starts)
    rows.sort(key=lambda x: number(x[0].get("request_start_time")) or t0)
    out = [_record(i, r, t0, ok) for i, (r, ok) in enumerate(rows)]
    return [r for r in out if r is not None]


def _aggregate(bench: Mapping[str, Any], duration: float) -> dict[str, Any]:
    metrics = obj(bench.get("metrics"))
    totals = obj(metrics.get("request_totals"))
    out: dict[str, Any] = {
        "completed": count(totals.get("successful")),
        "failed": (count(totals.get("errored")) or 0) + (count(totals.get("incomplete")) or 0),
        "duration": duration,
    }
    for lab, (name, scale) in _DISTRIBUTIONS.items():
        dist = obj(obj(metrics.get(name)).get("successful"))
        pcts = obj(dist.get("percentiles"))
        for stat in _STATS:
            v = number(dist.get(stat)) if stat in ("mean", "median") else number(pcts.get(stat))
            out[f"{stat}_{lab}_ms"] = None if v is None else v * scale
    out["request_throughput"] = number(
        obj(obj(metrics.get("requests_per_second")).get("successful")).get("mean")
    )
    out["output_throughput"] = number(
        obj(obj(metrics.get("output_tokens_per_second")).get("successful")).get("mean")
    )
    return {k: v for k, v in out.items() if v is not None}


def read_guidellm(doc: Mapping[str, Any]) -> list[FieldRun]:
    """One FieldRun per benchmark of the report."""
    version = obj(doc.get("metadata")).get("guidellm_version")
    runs = []
    for i, bench in enumerate(b for b in items(doc.get("benchmarks")) if isinstance(b, Mapping)):
        config = obj(bench.get("config"))
        strategy = obj(config.get("strategy"))
        duration = number(bench.get("duration")) or 0.0
        records = _records(bench)
        summary = (
            summarize(records, duration)
            if records and duration > 0
            else _aggregate(bench, duration)
        )
        rate = number(strategy.get("rate"))
        workload = {
            "strategy": strategy.get("type_") if isinstance(strategy.get("type_"), str) else None,
            "concurrency": count(strategy.get("streams")) or count(strategy.get("max_concurrency")),
            "request_rate": rate,
        }
        model = obj(config.get("backend")).get("model")
        runs.append(
            FieldRun(
                tool=TOOL,
                tool_version=str(version) if version else None,
                label=f"benchmarks[{i}]",
                summary=summary,
                records=records,
                model=str(model) if isinstance(model, str) else None,
                workload={k: v for k, v in workload.items() if v is not None},
            )
        )
    return runs
