"""The recorder: samplers in their own threads at their own rates (drift-free ticks, late ones
skipped and counted), rows handed to one sink in batches from one thread, a failing sink keeps its
rows, and the real samplers together."""

from __future__ import annotations

import threading
import time

import pytest

from core.records import SampleRow
from tests.checks import wait_for
from tests.fakes.fake_metrics import MetricsServer
from tests.fakes.fake_nvml import FakeNvml
from tests.fakes.proc_tree import Tree
from tuning.measure.telemetry.gpu import GpuSampler
from tuning.measure.telemetry.peaks import PEAK_KEYS, peaks
from tuning.measure.telemetry.proctree import ProcessTreeSampler
from tuning.measure.telemetry.prom import MetricsSampler
from tuning.measure.telemetry.recorder import Sampler, Telemetry

GIB = 1 << 30
MIB = 1 << 20


class Ticker(Sampler):
    """One row per call, recording when it was called."""

    def __init__(self, name: str, period: float, fail_every: int = 0) -> None:
        super().__init__(period)
        self.name = name
        self.fail_every = fail_every
        self.calls = 0
        self.opened = self.closed = False

    def open(self) -> None:
        self.opened = True

    def sample(self, t: float) -> list[SampleRow]:
        self.calls += 1
        if self.fail_every and self.calls % self.fail_every == 0:
            raise RuntimeError("flaky")
        return [SampleRow(t, self.name, float(self.calls))]

    def close(self) -> None:
        self.closed = True


def test_recorder_rates_batches_and_final_flush() -> None:
    samplers = [Ticker("fast", 0.05), Ticker("mid", 0.1), Ticker("slow", 0.25, fail_every=2)]
    batches: list[list[SampleRow]] = []
    sink_threads: set[str] = set()

    def sink(batch: list[SampleRow]) -> None:
        sink_threads.add(threading.current_thread().name)
        batches.append(batch)

    tel = Telemetry()
    began = time.monotonic()
    origin = began - 10.0  # the server started 10 s ago
    tel.start(samplers, sink, flush_every=0.3, origin=origin)
    assert tel.running
    # Until the slow sampler's 7th call (1.5 s of ticks) and three flushes during the run, not a
    # fixed time: on a loaded box ticks come late, and a late tick is skipped and counted.
    assert wait_for(lambda: samplers[2].calls >= 7 and len(batches) >= 3, timeout=60)
    result = tel.stop()
    elapsed = time.monotonic() - began
    assert not tel.running
    rows = [r for b in batches for r in b]
    counts = {s.name: sum(r.series == s.name for r in rows) for s in samplers}
    stats = tel.stats()
    # one row per call, every second slow call fails; nothing is lost between sampler and sink
    assert (counts["fast"], counts["mid"]) == (samplers[0].calls, samplers[1].calls), counts
    assert counts["slow"] == samplers[2].calls - samplers[2].calls // 2 >= 4, counts
    assert all(stats[s.name].samples == s.calls for s in samplers)
    # Each at its own rate, and never more ticks (made or skipped) than the time allows: no
    # bursts. Where the ticks land is test_ticks_land_on_the_grid_whatever_a_sample_costs's.
    for s in samplers:
        ticks = stats[s.name].samples + stats[s.name].missed_ticks
        assert ticks <= stats[s.name].wall_seconds / s.period + 1, (s.name, ticks)
    assert sink_threads == {"telemetry-flush"}
    assert sum(s.rows for s in stats.values()) == len(rows)  # stop flushed everything
    assert stats["slow"].errors == samplers[2].calls // 2 and stats["slow"].last_error
    assert all(s.opened and s.closed for s in samplers)
    fast = sorted(r.t for r in rows if r.series == "fast")
    assert 10.0 <= fast[0] < 10.0 + elapsed  # t is relative to the caller's origin
    assert set(result) == set(PEAK_KEYS)
    assert all(s.cpu_seconds >= 0 and s.wall_seconds > 1.0 for s in stats.values())


def test_recorder_keeps_rows_when_sink_fails_once() -> None:
    calls = {"n": 0}
    got: list[SampleRow] = []

    def sink(batch: list[SampleRow]) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("database is locked")
        got.extend(batch)

    tel = Telemetry()
    sampler = Ticker("x", 0.05)
    tel.start([sampler], sink, flush_every=0.2)
    assert wait_for(lambda: calls["n"] >= 2, timeout=30)  # a failed flush, then one that took it
    tel.stop()
    assert tel.sink_errors == 1
    assert [r.value for r in got] == [float(i) for i in range(1, sampler.calls + 1)]


def test_recorder_with_real_samplers(tree: Tree, metrics_server: MetricsServer) -> None:
    fake = FakeNvml()
    fake.script_used(0, [1 * GIB, 2 * GIB, 6 * GIB, 6 * GIB, 2 * GIB])
    fake.set_procs(0, [(tree.child_pid, 5 * GIB)])
    gpu = GpuSampler(tree.pid, period=0.1, nvml=fake)
    gpu.baseline()
    got: list[SampleRow] = []
    tel = Telemetry()
    tel.start(
        [ProcessTreeSampler(tree.pid, 0.1), gpu, MetricsSampler(metrics_server.url, period=0.25)],
        got.extend,
        flush_every=0.5,
    )
    # Wait for enough ticks rather than a fixed time: on a loaded 2-core box ticks get skipped.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(0.3)
        tel.flush()
        if (
            sum(r.series == "gpu_used_bytes" for r in got) >= 5
            and sum(r.series == "num_preemptions_total" for r in got) >= 5
        ):
            break
    result = tel.stop()
    assert fake.initialized == 0  # nvmlShutdown at close
    assert result["peak_gpu_used_bytes"] == 6 * GIB
    assert result["peak_gpu_used_over_baseline_bytes"] == 5 * GIB
    assert result["peak_gpu_tree_bytes"] == 5 * GIB
    assert result["peak_tree_rss_bytes"] and result["peak_tree_rss_bytes"] > 10 * MIB
    assert result["prefix_cache_hit_rate"] == pytest.approx(0.25)
    assert result["preemptions"] and result["preemptions"] >= 4
    series = {r.series for r in got}
    assert {
        "tree_rss_bytes",
        "proc_rss_bytes",
        "gpu_used_bytes",
        "gpu_proc_bytes",
        "kv_cache_usage_perc",
        "num_requests_running",
    } <= series
    assert peaks(got, gpu.baseline_used) == result


def test_recorder_flush_add_and_constructor_origin() -> None:
    got: list[SampleRow] = []
    sink_threads: set[str] = set()

    def sink(batch: list[SampleRow]) -> None:
        sink_threads.add(threading.current_thread().name)
        got.extend(batch)

    tel = Telemetry(origin=time.monotonic() - 100.0)
    tickers = [Ticker("a", 0.05), Ticker("b", 0.05), Ticker("b", 0.05)]
    tel.start(tickers[:1], sink, flush_every=30.0)  # the timer alone would never flush
    assert wait_for(lambda: tickers[0].calls >= 3)
    tel.add(tickers[1])
    tel.add(tickers[2])  # same name: counted separately
    # 13 calls leave at least 10 rows recorded (a call's row is buffered just after it counts)
    assert wait_for(lambda: sum(t.calls for t in tickers) >= 13 and tickers[2].calls > 0)
    assert got == []
    assert tel.flush(timeout=5) is True
    n = len(got)
    assert {r.series for r in got} == {"a", "b"} and n >= 10
    assert all(r.t > 100.0 for r in got)
    assert set(tel.stats()) == {"a", "b", "b#1"}
    tel.stop()
    assert len(got) >= n and sink_threads == {"telemetry-flush"}
    assert sum(s.rows for s in tel.stats().values()) == len(got)
    tel.add(Ticker("late", 0.05))  # after stop: ignored, no thread
    assert "late" not in tel.stats()
    assert tel.flush() is True


class Clock:
    """The recorder's clock in a test: it moves only when a sample works or the recorder waits."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def thread_time(self) -> float:
        return 0.0


class Waits:
    """The recorder's stop event on that clock: each wait moves it on; set after `n` waits."""

    def __init__(self, clock: Clock, n: int) -> None:
        self.clock, self.left = clock, n

    def is_set(self) -> bool:
        return self.left <= 0

    def wait(self, timeout: float | None = None) -> bool:
        self.clock.now += max(0.0, timeout or 0.0)
        self.left -= 1
        return self.is_set()


class Costly(Sampler):
    """Each read costs `cost` seconds of the clock; the read numbered `slow` costs `slow_cost`."""

    def __init__(self, clock: Clock, period: float, cost: float, slow: int, slow_cost: float):
        super().__init__(period)
        self.clock, self.cost, self.slow, self.slow_cost = clock, cost, slow, slow_cost
        self.calls = 0

    def sample(self, t: float) -> list[SampleRow]:
        self.calls += 1
        self.clock.now += self.slow_cost if self.calls == self.slow else self.cost
        return [SampleRow(t, "x", float(self.calls))]


def test_ticks_land_on_the_grid_whatever_a_sample_costs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drift-free: the k-th tick is read at start + k x period, not k x (period + cost), and a read
    that overruns skips the ticks it missed (counted) instead of bursting to catch up. On a clock
    of the test's own, so no machine's speed enters (it was a 40 ms tolerance on a real clock)."""
    from tuning.measure.telemetry import recorder

    clock = Clock()
    monkeypatch.setattr(recorder, "time", clock)  # monotonic() and thread_time(), as it reads
    period = 0.125  # binary fractions: the grid is exact
    sampler = Costly(clock, period, cost=0.03125, slow=4, slow_cost=0.3125)  # read 4: 2.5 ticks
    tel = Telemetry(origin=1000.0)
    tel._stop_sampling = Waits(clock, 8)  # type: ignore[assignment]
    stats = recorder.SamplerStats("x", period)
    got: list[SampleRow] = []
    monkeypatch.setattr(tel, "_buffer", got)
    tel._run_sampler(sampler, stats)
    ticks = [round(r.t / period, 9) for r in got]
    assert ticks == [0, 1, 2, 3, 6, 7, 8, 9]  # read 4 ran 2.5 periods late: ticks 4 and 5 skipped
    assert all(r.t == k * period for r, k in zip(got, ticks, strict=True))
    assert (stats.samples, stats.missed_ticks) == (8, 2)
