"""vLLM's `bench serve --save-result` JSON (one run) and a `bench sweep` folder
(`<exp>/SERVE-...-BENCH-.../run=N.json` + summary.json) read as lab runs.

The header (`model_id`, `max_concurrency`, `request_rate`, `num_prompts`) becomes the workload;
with `--save-detailed` the per-request lists (`ttfts`, `itls`, `latencies`, `start_times`,
`input_lens`, `output_lens`, `errors`) become request rows and the summary is recomputed from them
by the lab's own formulas; without them the file's `mean_/median_/pNN_*_ms` are kept as they are.
A sweep's run file also carries the server overrides of its combination (`max_num_seqs: 16`):
those are the server's flags, under vLLM's names with dashes."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from core.plausible import count, number
from core.records import RequestRecord
from tuning.measure.field.run import FieldRun, items
from tuning.measure.metrics import summarize

TOOL = "vllm-bench"
# Keys of a --save-result file that are not server overrides in a sweep's run file.
_HEADER = {
    "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
    "request_rate", "burstiness", "max_concurrency", "ramp_up_strategy", "ramp_up_start_rps",
    "ramp_up_end_rps", "run_number", "_benchmark_name",
}  # fmt: skip
_PER_REQUEST = ("ttfts", "itls", "latencies", "start_times", "input_lens", "output_lens")


def is_vllm_bench(doc: Any) -> bool:
    """A --save-result JSON: vLLM's header and result keys."""
    return (
        isinstance(doc, Mapping)
        and "completed" in doc
        and ("mean_ttft_ms" in doc or "ttfts" in doc or "model_id" in doc)
    )


def _records(doc: Mapping[str, Any]) -> list[RequestRecord] | None:
    """Request rows from --save-detailed lists (times relative to the first start), else None."""
    cols = [items(doc.get(k)) for k in _PER_REQUEST]
    n = len(cols[0])
    if not n or any(len(c) != n for c in cols):
        return None
    ttfts, itls, lats, starts, ins, outs = cols
    errors = items(doc.get("errors")) or [""] * n
    t0 = min((s for s in (number(x) for x in starts) if s is not None), default=0.0)
    out = []
    for i in range(n):
        start = (number(starts[i]) or t0) - t0
        err = str(errors[i] or "") if i < len(errors) else ""
        ok = not err and number(lats[i]) is not None and (number(lats[i]) or 0) > 0
        gaps = [g for g in (number(x) for x in items(itls[i])) if g is not None]
        out.append(
            RequestRecord(
                index=i,
                start=start,
                ttft=number(ttfts[i]) if ok else None,
                end=start + (number(lats[i]) or 0.0) if ok else None,
                itl=gaps if ok else [],
                prompt_tokens=count(ins[i]),
                output_tokens=count(outs[i]) if ok else None,
                ok=ok,
                error=err[:500] or None,
                error_kind="error" if not ok else None,
            )
        )
    return out


def _summary(doc: Mapping[str, Any], records: list[RequestRecord] | None) -> dict[str, Any]:
    duration = number(doc.get("duration")) or 0.0
    if records is not None and duration > 0:
        return summarize(records, duration)
    return {k: v for k, v in doc.items() if number(v) is not None and k not in _HEADER}


def server_overrides(doc: Mapping[str, Any], folder: str) -> dict[str, Any]:
    """The serve overrides a sweep merged into its run file: the keys its combination's folder
    name (`SERVE--max_num_seqs=16-BENCH--...`) lists in its SERVE part, named with dashes."""
    serve = folder.split("-BENCH-", 1)[0]
    if not serve.startswith("SERVE-"):
        return {}
    return {
        k.replace("_", "-"): v
        for k, v in doc.items()
        if f"{k}=" in serve and k not in _HEADER and isinstance(v, (str, int, float, bool))
    }


def _date(value: Any) -> str | None:
    """vLLM's `date` ('20261207-021929', local time) as ISO-8601; None when it is not one."""
    try:
        return datetime.strptime(str(value), "%Y%m%d-%H%M%S").isoformat() if value else None
    except ValueError:
        return None


def read_run(doc: Mapping[str, Any], label: str, folder: str = "") -> FieldRun:
    """One --save-result document as a FieldRun (a sweep's run file: with its server flags)."""
    records = _records(doc)
    rate = doc.get("request_rate")
    workload = {
        "concurrency": count(doc.get("max_concurrency")),
        "request_rate": None if rate in (None, "inf") else number(rate),
        "num_prompts": count(doc.get("num_prompts")),
        "backend": doc.get("backend") if isinstance(doc.get("backend"), str) else None,
    }
    return FieldRun(
        tool=TOOL,
        tool_version=None,  # the file does not say which vLLM wrote it
        label=label,
        summary=_summary(doc, records),
        records=records,
        model=str(doc["model_id"]) if isinstance(doc.get("model_id"), str) else None,
        workload={k: v for k, v in workload.items() if v is not None},
        config=server_overrides(doc, folder),
        started_at=_date(doc.get("date")),
    )
