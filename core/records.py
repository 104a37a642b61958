"""The row shapes every part of the lab agrees on: one request, one telemetry sample, and a new
experiment as the store writes it.

The load generator produces `RequestRecord`s, the samplers produce `SampleRow`s, the store keeps
both as they are, and metrics are always recomputed from them (so SLOs and formulas can change
later). `NewExperiment` is what tuning.experiment.spec's validated `ExperimentSpec` hands the store
(store.repo.create_experiment): typed to the last step, nothing checked again there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Why a request failed; None when it succeeded. "timeout": no complete response within the request
# timeout; "stalled": no data for the stall timeout after the first token; "implausible_usage": the
# server's token counts cannot be true (core.plausible), so none is kept and the run is suspect.
FAILURE_KINDS = (
    "http",
    "exception",
    "timeout",
    "stalled",
    "early_end",
    "stream_error",
    "no_usage",
    "implausible_usage",
)


@dataclass(slots=True)
class RequestRecord:
    """One measured request. Times are seconds relative to the run's first dispatch."""

    index: int
    start: float
    ttft: float | None = None  # first chunk carrying `choices`, minus start
    end: float | None = None  # last content chunk (the usage-only chunk does not move it)
    itl: list[float] = field(default_factory=list)  # every gap between consecutive content chunks
    prompt_tokens: int | None = None  # from the server's `usage`, when plausible
    output_tokens: int | None = None  # from the server's `usage` (never counted chunks), plausible
    ok: bool = False
    http_status: int | None = None
    error: str | None = None
    error_kind: str | None = None
    # Planned traffic (tuning.measure.traffic): which conversation and turn (0-based) this request
    # was,
    # and how late it went out against its planned send time (None where nothing was planned).
    conversation: int | None = None
    turn: int | None = None
    dispatch_lag: float | None = None

    @property
    def e2el(self) -> float | None:
        return None if self.end is None else self.end - self.start

    @property
    def chunks(self) -> int:
        """Content chunks received: the first, then one per ITL gap (0 when none came)."""
        return 0 if self.ttft is None else len(self.itl) + 1

    @property
    def tokens_per_chunk(self) -> float | None:
        """Output tokens (the server's usage) / content chunks: 1 when each chunk carries one
        token, more with `--stream-interval N` or speculative decoding. Computed once per request
        when asked, never per chunk; None without usage or chunks."""
        chunks = self.chunks
        return None if self.output_tokens is None or not chunks else self.output_tokens / chunks

    def to_row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class SampleRow:
    """One point of a time series: `series` names the quantity, `label` the process or device."""

    t: float  # seconds since the run (or server start) began, monotonic clock
    series: str  # e.g. "tree_rss_bytes", "gpu_used_bytes", "kv_cache_usage_perc"
    value: float
    label: str = ""  # e.g. "EngineCore:4200", "gpu0"; "" for a whole-tree or scalar series


@dataclass(frozen=True)
class NewExperiment:
    """A new experiment's row: its parameter and typed values, the baseline configuration, the
    workload (and traffic spec), the engine or attached server, how many runs and who asked.
    JSON-shaped parts are plain dicts and lists; `repeats` is the fixed count, or the first rounds
    of one that repeats until decided (`repeats_auto`, with its limits)."""

    param: str
    values: tuple[Any, ...] = ()
    name: str = ""
    repeats: int = 1
    config: Mapping[str, Any] = field(default_factory=dict)
    workload: Mapping[str, Any] = field(default_factory=dict)
    workload_spec: Mapping[str, Any] | None = None
    engine: Mapping[str, Any] | None = None
    base_url: str | None = None
    model: str | None = None
    author: str = ""
    host: str = ""
    repeats_auto: bool = False
    max_repeats: int | None = None
    budget_minutes: float | None = None
    resident: str = "auto"  # resident engines for repeats: auto, on or off

    @property
    def runs_total(self) -> int:
        return len(self.values) * self.repeats

    def columns(self) -> dict[str, Any]:
        """The experiments table's columns (the until-decided ones only when it repeats so)."""
        out: dict[str, Any] = {
            "name": self.name or self.param,
            "param": self.param,
            "values_json": list(self.values),
            "repeats": self.repeats,
            "config_json": dict(self.config),
            "workload_json": dict(self.workload),
            "workload_spec_json": None if self.workload_spec is None else dict(self.workload_spec),
            "engine_json": None if self.engine is None else dict(self.engine),
            "base_url": self.base_url,
            "model": self.model,
            "runs_total": self.runs_total,
            "author": self.author,
            "host": self.host,
            "resident_json": {"asked": self.resident},
        }
        if self.repeats_auto:
            out.update(
                repeats_auto=1, max_repeats=self.max_repeats, budget_minutes=self.budget_minutes
            )
        return out
