"""Stored runs written as vLLM's `bench serve --save-result` JSON: one run is one file of that
shape (header, results, `mean_/median_/std_/pNN_{ttft,tpot,itl,e2el}_ms`, and with request rows
the `--save-detailed` lists); an experiment is a `bench sweep` folder,
`SERVE--<param>=<value>/run=N.json` plus each combination's `summary.json` (the list of its
runs, each with the server override merged in, as `vllm bench sweep serve` writes it), which
`vllm bench sweep plot` reads. Pure functions over dicts; the CLI writes the files."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from core.records import RequestRecord

_RESULTS = (
    "duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
    "request_throughput", "output_throughput", "total_token_throughput",
)  # fmt: skip
_STAT = ("mean", "median", "std", "p90", "p99")


def _date(value: Any) -> str:
    """vLLM's `date` ('%Y%m%d-%H%M%S') from a stored ISO time."""
    try:
        return datetime.fromisoformat(str(value)).strftime("%Y%m%d-%H%M%S")
    except ValueError:
        return ""


def _detailed(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The --save-detailed lists, in request order (a failed request: ttft and latency 0)."""
    return {
        "input_lens": [r.prompt_tokens or 0 for r in records],
        "output_lens": [r.output_tokens or 0 for r in records],
        "ttfts": [r.ttft or 0.0 if r.ok else 0.0 for r in records],
        "itls": [list(r.itl) if r.ok else [] for r in records],
        "latencies": [(r.e2el or 0.0) if r.ok else 0.0 for r in records],
        "start_times": [r.start for r in records],
        "errors": ["" if r.ok else (r.error or "failed") for r in records],
    }


def bench_result(run: Mapping[str, Any], records: Sequence[RequestRecord] | None = None) -> dict:
    """One stored run (a row as store.queries returns it) as a --save-result document."""
    summary: Mapping[str, Any] = run.get("summary") or {}
    workload: Mapping[str, Any] = run.get("workload") or {}
    rate = workload.get("request_rate")
    out: dict[str, Any] = {
        "date": _date(run.get("started_at")),
        "endpoint_type": "vllm",
        "backend": "vllm",
        "label": None,
        "model_id": run.get("model"),
        "tokenizer_id": run.get("model"),
        "num_prompts": int(summary.get("completed") or 0) + int(summary.get("failed") or 0),
        "request_rate": rate if isinstance(rate, (int, float)) and rate > 0 else "inf",
        "burstiness": 1.0,
        "max_concurrency": workload.get("concurrency"),
    }
    out.update({k: summary.get(k) for k in _RESULTS})
    for metric in ("ttft", "tpot", "itl", "e2el"):
        for stat in _STAT:
            out[f"{stat}_{metric}_ms"] = summary.get(f"{stat}_{metric}_ms")
    if records:
        out.update(_detailed(records))
    return out


def sweep_key(param: str) -> str:
    """A flag as a sweep's serve override names it in JSON ('max_num_seqs')."""
    return param.replace("-", "_")


def combination_dir(param: str, value: str) -> str:
    """The folder `vllm bench sweep serve` gives a serve combination ('SERVE--max_num_seqs=16')."""
    text = f"SERVE--{sweep_key(param)}={value}"
    return text.replace("/", "_").replace("..", "__").strip("'").strip('"')


def sweep_files(
    runs: Iterable[tuple[Mapping[str, Any], Sequence[RequestRecord] | None]],
) -> dict[str, Any]:
    """relative path -> JSON document of a sweep folder holding `runs` (each with its request
    rows or None): every run as run=N.json in its value's combination, and each combination's
    summary.json."""
    combos: dict[str, list[dict[str, Any]]] = {}
    for run, records in runs:
        param, value = str(run.get("param") or "value"), str(run.get("value"))
        doc = bench_result(run, records)
        folder = combination_dir(param, value)
        doc["run_number"] = len(combos.setdefault(folder, []))
        config = run.get("config") or {}
        doc[sweep_key(param)] = config.get(param, run.get("value"))
        combos[folder].append(doc)
    files: dict[str, Any] = {}
    for folder, docs in combos.items():
        for doc in docs:
            files[f"{folder}/run={doc['run_number']}.json"] = doc
        files[f"{folder}/summary.json"] = docs
    return files
