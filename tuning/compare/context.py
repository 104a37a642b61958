"""What a set of runs was measured on, in words: model, hardware, engine and vLLM version, and the
workload, for a chart's subtitle and a report's cards. A chart or report file travels without the
lab around it, so it has to say itself what the numbers are of.

Runs that differ in a field say so: two or three values are listed, more read 'mixed (N)'. A
workload parameter the runs vary lists its values ('concurrency 8, 16, 32').
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from tuning.compare.comparability import run_workload
from tuning.compare.comparison import Comparison

Run = Mapping[str, Any]
LISTED = 3  # distinct values listed before a field reads 'mixed'
UNKNOWN = "unknown"


@dataclass(frozen=True)
class RunContext:
    """The context of some runs, each field one short phrase."""

    model: str
    hardware: str
    engine: str  # 'vLLM 0.25.0 (engine custom)'
    workload: str  # 'input 512 / output 256 tokens, concurrency 128, 3,072 requests'
    runs: int
    experiments: tuple[int, ...]

    def lines(self) -> list[str]:
        """Two lines for a chart's subtitle: what ran where, then the load."""
        return [
            f"model {self.model} · {self.hardware} · {self.engine}",
            f"workload: {self.workload}",
        ]

    def text(self) -> str:
        return " · ".join(self.lines())


def distinct(values: Iterable[Any], show: Callable[[Any], str] = str) -> str:
    """One value as it is, two or three listed ('a / b'), more as 'mixed (N)'; none: unknown."""
    seen = list(dict.fromkeys(show(v) for v in values if v not in (None, "")))
    if not seen:
        return UNKNOWN
    if len(seen) <= LISTED:
        return " / ".join(seen)
    return f"mixed ({len(seen)})"


def _count(value: Any) -> str:
    """12,345 for a whole number, else as it is."""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, (int, float)) and float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4g}" if isinstance(value, float) else str(value)


def _field(workloads: Sequence[Mapping[str, Any]], key: str) -> str | None:
    """The field's value(s) across the workloads as `_count` writes them; None when none has it."""
    values = [w.get(key) for w in workloads]
    if all(v is None for v in values):
        return None
    seen = list(dict.fromkeys(_count(v) for v in values if v is not None))
    return ", ".join(seen) if len(seen) <= LISTED else f"mixed ({len(seen)})"


def _source(spec: Mapping[str, Any]) -> str | None:
    """A data file's or trace's name ('sharegpt.json (sharegpt)'); None for synthetic prompts."""
    source = spec.get("source")
    if not isinstance(source, Mapping) or source.get("kind") in (None, "synthetic"):
        return None
    name = str(spec.get("name") or "") or PurePath(str(source.get("path") or "?")).name
    return f"{name} ({source.get('kind')})"


def workload_words(runs: Sequence[Run]) -> str:
    """'input 512 / output 256 tokens, concurrency 128, 3,072 requests'; a data file or trace by
    its name; an open loop by its rate. Fields the runs differ in list their values."""
    workloads = [run_workload(r) for r in runs]
    specs = [s for s in (r.get("workload_spec") for r in runs) if isinstance(s, Mapping)]
    parts = []
    sources = [x for x in map(_source, specs) if x]
    if sources:
        parts.append(distinct(sources))
    inp, out = _field(workloads, "input_len"), _field(workloads, "output_len")
    if inp or out:
        parts.append(f"input {inp or 'from data'} / output {out or 'from data'} tokens")
    if rate := _field(workloads, "request_rate"):
        parts.append(f"rate {rate} req/s")
    if conc := _field(workloads, "concurrency"):
        parts.append(f"{'at most ' if rate else ''}concurrency {conc}")
    if shared := _field([w for w in workloads if w.get("shared_prefix_len")], "shared_prefix_len"):
        parts.append(f"shared prefix {shared} tokens")
    if count := _field(workloads, "num_requests"):
        parts.append(f"{count} requests")
    return ", ".join(parts) or UNKNOWN


def _engine(run: Run) -> str | None:
    version, name = run.get("vllm_version"), run.get("engine")
    if not version and not name:
        return None
    text = f"vLLM {version or '?'}"
    return f"{text} (engine {name})" if name else text


def run_context(runs: Sequence[Run]) -> RunContext:
    """The context of these runs (rows as store.queries.load_runs reads them)."""
    return RunContext(
        model=distinct(r.get("model") for r in runs),
        hardware=distinct(r.get("hardware") for r in runs),
        engine=distinct(_engine(r) for r in runs),
        workload=workload_words(runs),
        runs=len(runs),
        experiments=tuple(
            sorted({int(r["experiment_id"]) for r in runs if r.get("experiment_id") is not None})
        ),
    )


def drawn_runs(runs: Sequence[Run], comparison: Comparison) -> list[Run]:
    """The runs a comparison's charts draw: those on one of its sides, in the order given."""
    ids = {rid for side in comparison.sides for rid in side.run_ids}
    return [r for r in runs if int(r["id"]) in ids]


def comparison_context(runs: Sequence[Run], comparison: Comparison) -> RunContext:
    """The context of the runs a comparison draws (all of `runs` when none is on a side)."""
    return run_context(drawn_runs(runs, comparison) or runs)
