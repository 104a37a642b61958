"""The recorder: runs a run's samplers in background threads and hands their rows to one sink.

Each sampler (`proctree.ProcessTreeSampler`, `gpu.GpuSampler`, `prom.MetricsSampler`) runs in its
own daemon thread at its own period and turns what it sees into `SampleRow`s (t = seconds since a
monotonic origin the caller chooses, usually the server's start). A `Telemetry` recorder owns the
threads, buffers the rows and hands them to one sink in batches from one flusher thread, so the
runner can write SQLite while the live page reads it, and the memory climb is recorded during the
run rather than as one snapshot after it.

The package imports only the standard library, psutil and prometheus_client at module level (NVML
lazily): it must stay importable on the GPU test machine, which has no sqlite-utils or Streamlit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from core.records import SampleRow
from tuning.measure.telemetry.completeness import SampleLoss, Ticks, count_series
from tuning.measure.telemetry.peaks import PeakTracker

log = logging.getLogger(__name__)

Sink = Callable[[list[SampleRow]], None]


class Sampler:
    """One source of samples. `Telemetry` calls open() once, sample(t) every `period`, close() once,
    all from the sampler's own thread; each may also be called directly (tests, one-off reads)."""

    name = "sampler"
    memory = False  # its rows are a memory series: a skipped tick may miss a peak (completeness)
    # Device memory in use before the server started; only a GPU sampler records one, and
    # `Telemetry.peaks` subtracts it for the over-baseline peak.
    baseline_used: Mapping[str, int] = MappingProxyType({})

    def __init__(self, period: float) -> None:
        if period <= 0:
            raise ValueError("period must be > 0")
        self.period = period

    def open(self) -> None:
        """Acquire what sampling needs (a library handle); never raises for a missing resource."""

    def sample(self, t: float) -> list[SampleRow]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what open() acquired."""


@dataclass(slots=True)
class SamplerStats:
    """What one sampler thread did; cpu_seconds is that thread's own CPU time (time.thread_time)."""

    name: str
    period: float
    samples: int = 0
    rows: int = 0
    errors: int = 0
    last_error: str | None = None
    missed_ticks: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0

    @property
    def cpu_percent(self) -> float:
        """Percent of one core the sampler itself used while running."""
        return 100.0 * self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


class Telemetry:
    """Runs samplers in daemon threads (one each, drift-free ticks at start + k*period), buffers
    their rows and calls `sink` with batches from a single flusher thread every `flush_every`
    seconds; the sink is never called from two threads (a SQLite connection it uses needs
    check_same_thread=False only because it was opened elsewhere). A sink that raises keeps its
    batch for the next flush (bounded by `max_pending`: the oldest rows beyond it are dropped, and
    at stop what one last retry could not store is dropped too; `loss()` counts both, and the
    ticks each sampler skipped). flush() pushes everything recorded so far through the sink and
    waits for it; stop() joins, flushes the rest and returns `peaks()`.
    One recorder per server life: samplers can be added while it runs (add()), not restarted.
    """

    def __init__(self, origin: float | None = None, max_pending: int = 200_000) -> None:
        self.max_pending = max_pending
        self.origin: float = time.monotonic() if origin is None else origin
        self.sink_errors = 0
        self.dropped: Counter[str] = Counter()  # series -> rows dropped, never stored
        self._memory: dict[str, bool] = {}  # sampler key -> whether its rows are memory
        self._samplers: list[Sampler] = []
        self._stats: dict[str, SamplerStats] = {}
        self._threads: list[threading.Thread] = []
        self._flusher: threading.Thread | None = None
        self._buffer: list[SampleRow] = []
        self._pending: list[SampleRow] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._requested = 0
        self._served = 0
        self._wake = threading.Event()
        self._stop_sampling = threading.Event()
        self._stop_flushing = threading.Event()
        self._tracker = PeakTracker()
        self._sink: Sink | None = None
        self._flush_every = 1.0
        self._started = False

    @property
    def running(self) -> bool:
        return self._started and not self._stop_sampling.is_set()

    def start(
        self,
        samplers: Sequence[Sampler],
        sink: Sink | None = None,
        flush_every: float = 1.0,
        *,
        origin: float | None = None,
    ) -> None:
        """Start sampling now; t of every row is time.monotonic() - origin (default: the origin
        given to the constructor, else the time the recorder was made)."""
        if self._started:
            raise RuntimeError("Telemetry already started; make a new one per run")
        self._started = True
        if origin is not None:
            self.origin = origin
        self._sink = sink
        self._flush_every = flush_every
        self._flusher = threading.Thread(
            target=self._run_flusher, name="telemetry-flush", daemon=True
        )
        self._flusher.start()
        for sampler in samplers:
            self.add(sampler)

    def add(self, sampler: Sampler) -> None:
        """Start one more sampler on a running recorder (e.g. /metrics once the server is up)."""
        if not self._started:
            raise RuntimeError("start() the recorder first")
        with self._lock:
            if self._stop_sampling.is_set():
                log.warning("telemetry: %s added after stop; ignored", sampler.name)
                return
            key, n = sampler.name, 1
            while key in self._stats:
                key, n = f"{sampler.name}#{n}", n + 1
            stats = SamplerStats(key, sampler.period)
            thread = threading.Thread(
                target=self._run_sampler,
                args=(sampler, stats),
                name=f"telemetry-{key}",
                daemon=True,
            )
            self._samplers.append(sampler)
            self._stats[key] = stats
            self._memory[key] = sampler.memory
            self._threads.append(thread)
            thread.start()

    def _run_sampler(self, sampler: Sampler, stats: SamplerStats) -> None:
        cpu0 = time.thread_time()
        wall0 = time.monotonic()
        try:
            sampler.open()
        except Exception as exc:  # a sampler never takes the run down
            stats.errors += 1
            stats.last_error = f"open: {type(exc).__name__}: {exc}"
            log.warning("telemetry %s: open failed: %s", stats.name, exc)
        start = time.monotonic()
        k = 0
        while not self._stop_sampling.is_set():
            now = time.monotonic()
            try:
                rows = sampler.sample(now - self.origin)
            except Exception as exc:
                rows = []
                stats.errors += 1
                if stats.last_error is None:
                    log.warning(
                        "telemetry %s: sample failed (counted): %s", stats.name, exc, exc_info=True
                    )
                stats.last_error = f"{type(exc).__name__}: {exc}"
            stats.samples += 1
            if rows:
                stats.rows += len(rows)
                with self._lock:
                    self._buffer.extend(rows)
            k += 1
            next_at = start + k * sampler.period
            now = time.monotonic()
            if now > next_at:  # late (slow sample or starved CPU): skip, not burst
                skipped = int((now - next_at) // sampler.period) + 1
                stats.missed_ticks += skipped
                k += skipped
                next_at = start + k * sampler.period
            self._stop_sampling.wait(next_at - now)
        try:
            sampler.close()
        except Exception as exc:
            log.debug("telemetry %s: close failed: %s", stats.name, exc)
        stats.cpu_seconds = time.thread_time() - cpu0
        stats.wall_seconds = time.monotonic() - wall0

    def _flush(self) -> None:
        with self._lock:
            batch, self._buffer = self._buffer, []
        if batch:
            self._tracker.add(batch)
        if self._sink is None:
            return
        batch = self._pending + batch
        self._pending = []
        if not batch:
            return
        try:
            self._sink(batch)
        except Exception as exc:
            self.sink_errors += 1
            log.warning(
                "telemetry sink failed (%d rows kept for the next flush): %s", len(batch), exc
            )
            if len(batch) > self.max_pending:
                self.dropped.update(count_series(batch[: -self.max_pending]))
                batch = batch[-self.max_pending :]
            self._pending = batch

    def _run_flusher(self) -> None:
        while True:
            self._wake.wait(self._flush_every)
            self._wake.clear()
            stopping = self._stop_flushing.is_set()
            with self._cond:
                request = self._requested  # read before the buffer swap: see flush()
            self._flush()
            if stopping and self._pending:  # one retry for what the sink refused last
                self._flush()
            if stopping and self._sink is not None and self._pending:  # refused again: lost
                log.warning("telemetry: %d rows never stored", len(self._pending))
                self.dropped.update(count_series(self._pending))
                self._pending = []
            with self._cond:
                self._served = request
                self._cond.notify_all()
            if stopping:
                return

    def flush(self, timeout: float = 30.0) -> bool:
        """Push every row recorded so far through the sink (on the flusher thread) and wait.
        True when nothing is left pending (the sink took everything)."""
        if self._flusher is None or not self._flusher.is_alive():
            return not self._pending
        with self._cond:
            self._requested += 1
            mine = self._requested
            self._wake.set()
            self._cond.wait_for(lambda: self._served >= mine or not self._flusher_alive(), timeout)
        return not self._pending

    def _flusher_alive(self) -> bool:
        return self._flusher is not None and self._flusher.is_alive()

    def stop(self, timeout: float = 10.0) -> dict[str, float | None]:
        """Stop the samplers, flush every remaining row to the sink, return the run's peaks."""
        if not self._started:
            return self._tracker.result()
        with self._lock:
            self._stop_sampling.set()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._stop_flushing.set()
        self._wake.set()
        if self._flusher is not None:
            self._flusher.join(max(0.0, deadline - time.monotonic()))
        return self.peaks()

    def peaks(self) -> dict[str, float | None]:
        """Peaks over the rows flushed so far (all of them after stop()), as `peaks()` without
        a window; the GPU baseline comes from a sampler that recorded one (a GpuSampler)."""
        baseline: dict[str, int] = {}
        for sampler in self._samplers:
            baseline.update(sampler.baseline_used)
        return self._tracker.result(baseline or None)

    @property
    def dropped_rows(self) -> int:
        return sum(self.dropped.values())

    def loss(self) -> SampleLoss:
        """What this recorder has lost so far: rows dropped, rows the sink refused and holds for
        a retry (not stored yet: after flush() a run's peaks are read without them), and each
        sampler's ticks."""
        unstored = count_series(list(self._pending))
        ticks = {
            key: Ticks(st.samples, st.samples + st.missed_ticks, self._memory[key], st.rows)
            for key, st in list(self._stats.items())
        }
        return SampleLoss(dict(self.dropped), dict(unstored), ticks)

    def stats(self) -> dict[str, SamplerStats]:
        """Per-sampler counters (samples, rows, errors, missed ticks, own CPU after stop)."""
        return dict(self._stats)
