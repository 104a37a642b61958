"""What a run of the load generator returns (`LoadResult`), the options it takes (`LoadOptions`)
and its one exception; `tuning.measure.loadgen.client` runs it."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from core.records import RequestRecord

Progress = Callable[[int, int], None]
PhaseCallback = Callable[[str], None]  # called with "warming_up", then "loading"


class LoadError(RuntimeError):
    """The load generator itself failed (not a request: those are records)."""


class LoadOptions(TypedDict, total=False):
    """The optional keywords of `run_load`, `run_load_sync` and `run_load_in_subprocess`."""

    api_key: str | None  # default: OPENAI_API_KEY
    on_progress: Progress | None  # (done, total) about every 250 ms and at the end
    cancel: threading.Event | None  # set: stop dispatching, cancel what is in flight
    on_phase: PhaseCallback | None
    transport: str  # one of TRANSPORTS; default DEFAULT_TRANSPORT
    server_stats: bool  # read vLLM's /metrics, settled, around the measured phase (default False)


@dataclass(repr=False)
class LoadResult:
    """What one run of the load generator produced: the measured records and the client's health.

    Times in `records` and `inflight` are seconds since `t0_perf_counter` (the first measured
    dispatch). `client_cpu_util` is CPU seconds of the whole process per wall second (1.0 = one
    core busy); `loop_cpu_s` is the event-loop thread's own CPU, which stays honest when telemetry
    threads share the process.
    """

    records: list[RequestRecord]
    duration_s: float
    started_at_unix: float
    t0_perf_counter: float
    concurrency: int
    client_cpu_s: float
    client_cpu_util: float
    loop_cpu_s: float
    loop_lag_mean_ms: float
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    inflight: list[tuple[float, int]] = field(default_factory=list)
    warmup_failed: int = 0
    warmup_errors: list[str] = field(default_factory=list)
    gc_collections: int = 0
    cancelled: bool = False
    # vLLM's counters and histograms just before the first and after the last measured request
    # (`server_stats=True`; None when not asked or not readable), and how each read settled.
    server_before: dict[str, float] | None = None
    server_after: dict[str, float] | None = None
    server_reads: dict[str, Any] = field(default_factory=dict)
    # time.monotonic() at the first measured dispatch: the system-wide clock a parent process can
    # place the load on, however late the child's "loading" phase message reaches it.
    started_monotonic: float | None = None

    def __repr__(self) -> str:
        # Short on purpose: asyncio.Runner formats the main task's result in a ValueError message
        # on its way out (signal.getsignal), and a full repr of a million records takes seconds.
        ok = sum(1 for r in self.records if r.ok)
        return (
            f"LoadResult({len(self.records)} records, {ok} ok, {self.duration_s:.3f} s, "
            f"C={self.concurrency}, cancelled={self.cancelled})"
        )

    def health(self) -> dict[str, Any]:
        """Everything but the records: the client-side facts stored next to the run."""
        out = asdict(self)
        for key in ("records", "server_before", "server_after"):  # kept in the run's health
            out.pop(key)
        out["inflight"] = [list(p) for p in self.inflight]
        return out
