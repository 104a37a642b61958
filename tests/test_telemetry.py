"""Samplers and the recorder, without vLLM: a real process tree, a scripted NVML, a local /metrics."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil
import pytest

from core.records import SampleRow
from tuning.telemetry.gpu import GpuSampler, read_gpu_used, wait_gpu_memory_released
from tuning.telemetry.peaks import PEAK_KEYS, peaks
from tuning.telemetry.proctree import ProcessTreeSampler, process_name
from tuning.telemetry.prom import MetricsSampler, parse_vllm_metrics
from tuning.telemetry.recorder import Sampler, Telemetry

try:
    from fakes.fake_nvml import FakeNvml
except ImportError:  # tests/ imported as a package
    from tests.fakes.fake_nvml import FakeNvml

DATA = Path(__file__).parent / "data"
GIB = 1 << 30
MIB = 1 << 20
ALLOC_MB = 80

# The child waits for a line on stdin, then allocates (and touches) ALLOC_MB and holds it.
CHILD = f"""
import os, sys, time
print(os.getpid(), flush=True)
sys.stdin.readline()
data = b"x" * ({ALLOC_MB} << 20)
print("ready", flush=True)
time.sleep(120)
"""
PARENT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}])
sys.exit(child.wait())
"""


class Tree:
    """A python parent (like vLLM's API server) with one child (like EngineCore)."""

    def __init__(self) -> None:
        self.parent = subprocess.Popen(
            [sys.executable, "-c", PARENT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.parent.stdout is not None
        self.child_pid = int(self.parent.stdout.readline())
        self.pid = self.parent.pid

    def allocate(self) -> None:
        assert self.parent.stdin is not None and self.parent.stdout is not None
        self.parent.stdin.write("go\n")
        self.parent.stdin.flush()
        assert self.parent.stdout.readline().strip() == "ready"

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the group we started, nothing else
        except ProcessLookupError:
            pass
        self.parent.wait(timeout=10)
        for stream in (self.parent.stdin, self.parent.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def tree() -> Iterator[Tree]:
    t = Tree()
    try:
        yield t
    finally:
        t.kill()


def by_series(rows: list[SampleRow], series: str) -> dict[str, float]:
    return {r.label: r.value for r in rows if r.series == series}


# --------------------------------------------------------------------------- process tree


def test_process_name_from_vllm_titles() -> None:
    assert process_name(["VLLM::EngineCore"]) == "EngineCore"
    assert process_name(["VLLM::Worker_TP0  "]) == "Worker_TP0"
    assert process_name(["MYLAB::EngineCore_DP1"]) == "EngineCore_DP1"
    assert (
        process_name(
            ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"]
        )
        == "APIServer"
    )
    assert process_name(["/venv/bin/vllm", "serve", "tiny"]) == "APIServer"
    assert process_name(["/venv/bin/python3", "/venv/bin/vllm", "serve", "tiny"]) == "APIServer"
    assert process_name(["/usr/bin/python3", "-c", "pass"], "python3") == "python3"
    assert process_name([], "VLLM::EngineCor") == "EngineCor"
    assert process_name([], "") == "proc"


def test_tree_rss_rises_by_the_child_allocation(tree: Tree) -> None:
    sampler = ProcessTreeSampler(tree.pid, period=0.1)
    before = sampler.sample(0.0)
    labels = by_series(before, "proc_rss_bytes")
    assert any(label.endswith(f":{tree.pid}") for label in labels)
    assert any(label.endswith(f":{tree.child_pid}") for label in labels)
    rss0 = by_series(before, "tree_rss_bytes")[""]

    tree.allocate()
    after = sampler.sample(0.1)
    rss1 = by_series(after, "tree_rss_bytes")[""]
    rise_mb = (rss1 - rss0) / MIB
    assert ALLOC_MB * 0.85 < rise_mb < ALLOC_MB * 1.35, rise_mb
    child = [
        v for k, v in by_series(after, "proc_rss_bytes").items() if k.endswith(f":{tree.child_pid}")
    ]
    assert child and child[0] > ALLOC_MB * MIB
    assert sum(by_series(after, "proc_rss_bytes").values()) == rss1
    assert "" in by_series(after, "tree_cpu_percent")
    assert all(r.t == 0.1 for r in after)


def test_orphaned_child_still_counted_and_gone_tree_gives_nothing(tree: Tree) -> None:
    sampler = ProcessTreeSampler(tree.pid, period=0.1)
    sampler.sample(0.0)
    os.kill(tree.pid, signal.SIGKILL)  # the "API server" dies, the "EngineCore" lingers
    tree.parent.wait(timeout=10)
    rows = sampler.sample(0.1)
    assert any(k.endswith(f":{tree.child_pid}") for k in by_series(rows, "proc_rss_bytes"))
    os.kill(tree.child_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(tree.child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sampler.sample(0.2) == []


def test_process_tree_sampler_is_cheap(tree: Tree) -> None:
    sampler = ProcessTreeSampler(tree.pid, period=0.1)
    sampler.sample(0.0)
    cpu0 = time.thread_time()
    for i in range(50):
        sampler.sample(i * 0.1)
    per_sample_ms = (time.thread_time() - cpu0) / 50 * 1000
    assert per_sample_ms < 5.0, per_sample_ms  # < 5% of a core at 100 ms even on a busy box


# --------------------------------------------------------------------------- GPU (fake NVML)


def test_gpu_attribution_only_to_the_tree(tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    fake.script_used(0, [1 * GIB, 3 * GIB, 9 * GIB])
    fake.util[0] = 42
    foreign = os.getpid()  # exists, but outside the server's tree
    fake.set_procs(0, [(tree.child_pid, 8 * GIB), (tree.pid, None), (foreign, 1 * GIB)])
    gpu = GpuSampler(period=0.1, nvml=fake)
    assert gpu.baseline() == {"gpu0": 1 * GIB}
    gpu.root_pid = tree.pid
    with caplog.at_level(logging.WARNING, logger="tuning.telemetry.gpu"):
        rows = gpu.sample(0.5)
        rows2 = gpu.sample(0.6)
    assert gpu.available is True
    assert by_series(rows, "gpu_used_bytes") == {"gpu0": 3 * GIB}
    assert by_series(rows2, "gpu_used_bytes") == {"gpu0": 9 * GIB}
    assert by_series(rows, "gpu_util_percent") == {"gpu0": 42}
    procs = by_series(rows, "gpu_proc_bytes")
    assert list(procs.values()) == [8 * GIB]
    assert list(procs)[0].endswith(f":{tree.child_pid}")
    assert by_series(rows, "gpu_tree_bytes") == {"gpu0": 8 * GIB}  # not 9: foreign pid excluded
    assert not any(str(tree.pid) in r.label for r in rows)  # None usage: skipped, not 0
    assert sum("usedGpuMemory None" in r.message for r in caplog.records) == 1
    gpu.close()
    assert fake.init_calls == 1 and fake.shutdown_calls == 1


def test_gpu_unknown_usage_writes_no_tree_sum(tree: Tree) -> None:
    fake = FakeNvml()
    fake.set_procs(0, [(tree.child_pid, None)])
    gpu = GpuSampler(tree.pid, nvml=fake)
    rows = gpu.sample(0.0)
    assert "gpu_tree_bytes" not in {r.series for r in rows}
    assert "gpu_proc_bytes" not in {r.series for r in rows}
    assert by_series(rows, "gpu_used_bytes") == {"gpu0": 500 * MIB}
    gpu.close()


def test_gpu_foreign_pid_namespace_is_unknown_not_zero(
    tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml()
    fake.set_procs(0, [(99_999_999, 4 * GIB)])  # a host pid that does not exist here
    gpu = GpuSampler(tree.pid, nvml=fake)
    with caplog.at_level(logging.WARNING, logger="tuning.telemetry.gpu"):
        rows = gpu.sample(0.0) + gpu.sample(0.1)
    assert "gpu_tree_bytes" not in {r.series for r in rows}
    assert sum("PID namespace" in r.message for r in caplog.records) == 1
    fake.set_procs(0, [(os.getpid(), 4 * GIB)])  # a real process, just not ours: tree holds 0
    assert by_series(gpu.sample(0.2), "gpu_tree_bytes") == {"gpu0": 0.0}
    gpu.close()


def test_gpu_unsupported_calls_probed_once(tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    fake.procs_unsupported = True
    fake.util_unsupported = True
    gpu = GpuSampler(tree.pid, nvml=fake)
    with caplog.at_level(logging.WARNING, logger="tuning.telemetry.gpu"):
        rows = [r for i in range(5) for r in gpu.sample(i * 0.1)]
    assert fake.proc_calls == 1 and fake.util_calls == 1
    assert [r.series for r in rows] == ["gpu_used_bytes"] * 5
    assert sum("not supported" in r.message for r in caplog.records) == 2
    fake.fail_memory_once = True  # a transient error is counted, not fatal
    assert gpu.sample(1.0) == [] and gpu.errors == 1
    assert len(gpu.sample(1.1)) == 1
    gpu.close()


def test_gpu_two_devices_and_sys_modules_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(devices=2)
    fake.script_used(0, [2 * GIB])
    fake.script_used(1, [3 * GIB])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert read_gpu_used() == {"gpu0": 2 * GIB, "gpu1": 3 * GIB}
    gpu = GpuSampler(None)  # device-level only, no tree
    rows = gpu.sample(0.0)
    assert by_series(rows, "gpu_used_bytes") == {"gpu0": 2 * GIB, "gpu1": 3 * GIB}
    assert "gpu_tree_bytes" not in {r.series for r in rows}
    assert peaks(rows)["peak_gpu_used_bytes"] == 5 * GIB  # summed over devices at one instant
    gpu.close()
    assert fake.initialized == 0


@pytest.mark.parametrize("how", ["absent", "no_driver"])
def test_gpu_absent_nvml_tolerated(
    how: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    nvml = None
    if how == "absent":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    else:
        nvml = FakeNvml()
        nvml.fail_init = True
    with caplog.at_level(logging.WARNING, logger="tuning.telemetry.gpu"):
        gpu = GpuSampler(os.getpid(), nvml=nvml)
        assert gpu.baseline() == {}
        assert [gpu.sample(i * 0.1) for i in range(3)] == [[], [], []]
        gpu.close()
    assert gpu.available is False and gpu.unavailable_reason
    assert sum("NVML unavailable" in r.message for r in caplog.records) == 1
    assert read_gpu_used(nvml) == {}
    assert wait_gpu_memory_released({}, timeout=0.1, nvml=nvml) is True


def test_real_pynvml_without_driver_is_tolerated() -> None:
    gpu = GpuSampler(os.getpid())
    gpu.open()
    if gpu.available:
        gpu.close()
        pytest.skip("this machine has an NVIDIA driver")
    assert gpu.sample(0.0) == []
    gpu.close()


def test_wait_gpu_memory_released() -> None:
    fake = FakeNvml()
    fake.script_used(0, [10 * GIB, 8 * GIB, 5 * GIB, 1 * GIB + 100 * MIB])
    assert (
        wait_gpu_memory_released(
            {"gpu0": 1 * GIB}, tolerance=256 * MIB, timeout=5, poll=0.01, nvml=fake
        )
        is True
    )
    assert fake.memory_calls == 4 and fake.initialized == 0
    fake.script_used(0, [10 * GIB])
    t0 = time.monotonic()
    assert wait_gpu_memory_released({"gpu0": 1 * GIB}, timeout=0.2, poll=0.02, nvml=fake) is False
    assert time.monotonic() - t0 < 2
    assert fake.initialized == 0


# --------------------------------------------------------------------------- /metrics

SNIPPET = """\
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="tiny"} 3.0
vllm:num_preemptions_created{engine="0",model_name="tiny"} 1.7962334282248952e+09
vllm:num_preemptions_total{engine="1",model_name="tiny"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="tiny"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="tiny"} 0.75
# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 10.0
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 2.0
vllm:request_success_created{engine="0",finished_reason="length",model_name="tiny"} 1.79e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="tiny"} 4.0
vllm:num_requests_waiting_by_reason{engine="0",model_name="tiny",reason="capacity"} 9.0
# TYPE vllm:iteration_tokens_total histogram
vllm:iteration_tokens_total_bucket{engine="0",le="1.0",model_name="tiny"} 7.0
vllm:iteration_tokens_total_count{engine="0",model_name="tiny"} 7.0
vllm:prompt_tokens_cached_total{engine="0",model_name="tiny"} 99.0
"""


def test_parse_snippet_sums_engines_and_reasons() -> None:
    values = parse_vllm_metrics(SNIPPET)
    assert values == {
        "num_preemptions_total": 5.0,
        "kv_cache_usage_perc": 0.5,  # averaged over engines, kept 0..1
        "request_success_total": 12.0,
        "num_requests_running": 4.0,
    }


def test_parse_real_embedded_engine_dump() -> None:
    values = parse_vllm_metrics((DATA / "real_metrics.txt").read_text())
    assert values == {
        "num_requests_running": 0.0,
        "num_requests_waiting": 0.0,
        "kv_cache_usage_perc": 0.0,
        "prefix_cache_queries_total": 5.0,
        "prefix_cache_hits_total": 0.0,
        "num_preemptions_total": 0.0,
        "prompt_tokens_total": 5.0,
        "generation_tokens_total": 16.0,
        "request_success_total": 1.0,
    }


def test_parse_old_gpu_cache_name_and_garbage() -> None:
    assert parse_vllm_metrics('vllm:gpu_cache_usage_perc{model_name="m"} 0.5\n') == {
        "kv_cache_usage_perc": 0.5
    }
    assert parse_vllm_metrics("<html>not metrics</html>") == {}


class MetricsServer:
    """A local stand-in for vLLM's /metrics whose counters move between scrapes."""

    def __init__(self) -> None:
        self.hits = 0
        self.mode = "ok"  # ok | error | slow
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                if server.mode == "slow":
                    time.sleep(1.0)
                if server.mode == "error" or self.path != "/metrics":
                    self.send_response(500)
                    self.end_headers()
                    return
                server.hits += 1
                n = server.hits
                body = (
                    f'vllm:kv_cache_usage_perc{{engine="0",model_name="tiny"}} {min(1, n / 10)}\n'
                    f'vllm:num_requests_running{{engine="0",model_name="tiny"}} {n % 4}\n'
                    f'vllm:num_requests_waiting{{engine="0",model_name="tiny"}} {n % 3}\n'
                    f'vllm:num_preemptions_total{{engine="0",model_name="tiny"}} {2 * n}\n'
                    f'vllm:prefix_cache_queries_total{{engine="0",model_name="tiny"}} {100 * n}\n'
                    f'vllm:prefix_cache_hits_total{{engine="0",model_name="tiny"}} {25 * n}\n'
                    f'vllm:generation_tokens_total{{engine="0",model_name="tiny"}} {16 * n}\n'
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    server = MetricsServer()
    try:
        yield server
    finally:
        server.close()


def test_metrics_sampler_reads_and_counts_failures(metrics_server: MetricsServer) -> None:
    sampler = MetricsSampler(metrics_server.url + "/", period=0.5, timeout=0.3)
    rows = sampler.sample(1.5)
    assert by_series(rows, "num_preemptions_total") == {"": 2.0}
    assert by_series(rows, "kv_cache_usage_perc") == {"": 0.1}
    assert all(r.t == 1.5 for r in rows)
    metrics_server.mode = "error"
    assert sampler.sample(2.0) == []
    metrics_server.mode = "slow"
    t0 = time.monotonic()
    assert sampler.sample(2.5) == []
    assert time.monotonic() - t0 < 0.9
    assert sampler.failures == 2 and "timed out" in (sampler.last_error or "")
    metrics_server.mode = "ok"
    dead = MetricsSampler("http://127.0.0.1:9", timeout=0.3)  # nothing listens there
    assert dead.sample(0.0) == [] and dead.failures == 1


# --------------------------------------------------------------------------- peaks


def test_peaks_from_rows_in_any_order() -> None:
    rows = [
        SampleRow(0.0, "num_preemptions_total", 5.0),
        SampleRow(3.0, "num_preemptions_total", 9.0),
        SampleRow(0.0, "prefix_cache_queries_total", 100.0),
        SampleRow(3.0, "prefix_cache_queries_total", 500.0),
        SampleRow(0.0, "prefix_cache_hits_total", 10.0),
        SampleRow(3.0, "prefix_cache_hits_total", 110.0),
        SampleRow(1.0, "gpu_used_bytes", 4.0, "gpu0"),
        SampleRow(1.0, "gpu_used_bytes", 5.0, "gpu1"),
        SampleRow(2.0, "gpu_used_bytes", 8.0, "gpu0"),
        SampleRow(2.0, "gpu_used_bytes", 0.0, "gpu1"),
        SampleRow(1.0, "gpu_tree_bytes", 3.0, "gpu0"),
        SampleRow(1.0, "tree_rss_bytes", 7.0),
        SampleRow(2.0, "tree_rss_bytes", 6.0),
        SampleRow(1.0, "kv_cache_usage_perc", 0.9),
        SampleRow(2.0, "num_requests_waiting", 3.0),
        SampleRow(1.0, "generation_tokens_total", 10.0),
    ]
    result = peaks(list(reversed(rows)), gpu_baseline={"gpu0": 1, "gpu1": 1})
    assert set(result) == set(PEAK_KEYS)
    assert result["peak_gpu_used_bytes"] == 9.0
    assert result["peak_gpu_used_over_baseline_bytes"] == 7.0
    assert result["peak_gpu_tree_bytes"] == 3.0
    assert result["peak_tree_rss_bytes"] == 7.0
    assert result["preemptions"] == 4.0
    assert result["prefix_cache_hit_rate"] == 0.25
    assert result["generation_tokens_delta"] == 0.0
    assert result["max_num_requests_waiting"] == 3.0
    assert result["peak_kv_cache_usage_perc"] == 0.9
    assert result["max_num_requests_running"] is None
    assert peaks([])["prefix_cache_hit_rate"] is None


# --------------------------------------------------------------------------- recorder


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
    origin = time.monotonic() - 10.0  # the server started 10 s ago
    tel.start(samplers, sink, flush_every=0.3, origin=origin)
    assert tel.running
    time.sleep(1.5)
    result = tel.stop()
    assert not tel.running
    rows = [r for b in batches for r in b]
    counts = {s.name: sum(r.series == s.name for r in rows) for s in samplers}
    # 1.5 s at 50/100/250 ms: ~31/16/7 calls (a tick at t=0); every second slow call fails
    assert 20 <= counts["fast"] <= 32, counts
    assert 11 <= counts["mid"] <= 17, counts
    assert 2 <= counts["slow"] <= 4, counts
    assert len(batches) >= 3  # flushed during the run, not only at stop
    assert sink_threads == {"telemetry-flush"}
    stats = tel.stats()
    assert sum(s.rows for s in stats.values()) == len(rows)  # stop flushed everything
    assert stats["slow"].errors == samplers[2].calls // 2 and stats["slow"].last_error
    assert all(s.opened and s.closed for s in samplers)
    fast = sorted(r.t for r in rows if r.series == "fast")
    assert 9.9 < fast[0] < 10.3  # t is relative to the caller's origin
    # drift-free: the k-th tick lands near start + k*period, not start + k*(period + cost)
    ks = [round((t - fast[0]) / 0.05) for t in fast]
    assert max(abs((t - fast[0]) - k * 0.05) for t, k in zip(fast, ks)) < 0.04
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
    time.sleep(0.7)
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


def test_peaks_window_takes_load_keys_inside_and_memory_over_all() -> None:
    rows = [
        SampleRow(0.5, "gpu_used_bytes", 9.0, "gpu0"),  # startup peak, before the load
        SampleRow(1.0, "tree_rss_bytes", 5.0),
        SampleRow(2.5, "gpu_used_bytes", 7.0, "gpu0"),
        SampleRow(3.0, "tree_rss_bytes", 4.0),
        SampleRow(1.0, "kv_cache_usage_perc", 0.9),  # warm-up, outside
        SampleRow(3.0, "kv_cache_usage_perc", 0.4),
    ]
    rows += [
        SampleRow(t, "num_preemptions_total", v)
        for t, v in ((0.0, 0.0), (1.5, 1.0), (2.5, 3.0), (4.5, 7.0), (6.0, 9.0))
    ]
    rows += [SampleRow(t, "prefix_cache_queries_total", 100.0 * t) for t in (1.5, 2.5, 4.5)]
    rows += [SampleRow(t, "prefix_cache_hits_total", 50.0 * t) for t in (1.5, 2.5, 4.5)]
    result = peaks(rows, window=(2.0, 4.0))
    assert result["peak_gpu_used_bytes"] == 9.0 and result["load_peak_gpu_used_bytes"] == 7.0
    assert result["peak_tree_rss_bytes"] == 5.0 and result["load_peak_tree_rss_bytes"] == 4.0
    assert result["load_peak_gpu_tree_bytes"] is None
    assert result["peak_kv_cache_usage_perc"] == 0.4
    assert result["preemptions"] == 6.0  # 7 (first at/after 4.0) - 1 (last at/before 2.0)
    assert result["prefix_cache_hit_rate"] == 0.5
    assert peaks(rows)["preemptions"] == 9.0 and peaks(rows)["load_peak_gpu_used_bytes"] is None


def test_recorder_flush_add_and_constructor_origin() -> None:
    got: list[SampleRow] = []
    sink_threads: set[str] = set()

    def sink(batch: list[SampleRow]) -> None:
        sink_threads.add(threading.current_thread().name)
        got.extend(batch)

    tel = Telemetry(origin=time.monotonic() - 100.0)
    tel.start([Ticker("a", 0.05)], sink, flush_every=30.0)  # the timer alone would never flush
    time.sleep(0.3)
    tel.add(Ticker("b", 0.05))
    tel.add(Ticker("b", 0.05))  # same name: counted separately
    time.sleep(0.3)
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


def test_no_root_pid_samples_nothing() -> None:
    assert ProcessTreeSampler(0).sample(0.0) == []
    assert ProcessTreeSampler(99_999_999).sample(0.0) == []
