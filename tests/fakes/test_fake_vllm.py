"""The fake vLLM, started by the lab's own ServerProcess: each fault does what it says, and every
start ends with no process of ours left and the port free. No real engine (fast tier)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from store import connect, queries
from tests.fakes.engines import fake_launch, fake_settings_env, foreign_listener
from tests.fakes.fake_vllm import DEFAULTS, GIB
from tuning.engine.server import ServerProcess, StartFailure, http_get, port_is_free

REPO = Path(__file__).resolve().parents[2]
Events = list[Any]


class Lab:
    """Starts fakes the runner's way and checks, at the end, that nothing of theirs is left."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.servers: list[ServerProcess] = []
        self.record = tmp / "record.jsonl"

    def start(self, faults: str = "", config: dict[str, Any] | None = None) -> ServerProcess:
        server = ServerProcess(fake_launch(config, faults), self.tmp / f"s{len(self.servers)}.log")
        self.servers.append(server)
        server.start()
        return server

    def healthy(self, faults: str = "", config: dict[str, Any] | None = None) -> ServerProcess:
        server = self.start(faults, config)
        server.wait_healthy(timeout=20)
        return server

    def pids(self) -> set[int]:
        """Every pid a fake reported (API server, EngineCore, holder), from FAKE_VLLM_RECORD."""
        if not self.record.exists():
            return set()
        lines = self.record.read_text().splitlines()
        return {pid for line in lines for pid in json.loads(line)["pids"].values()}

    def assert_all_gone(self) -> None:
        for server in self.servers:
            server.stop(grace=1.0, timeout=10)
            assert port_is_free(server.launch.host, server.launch.port)
        deadline = time.monotonic() + 5  # an orphan is reaped by init, not by us
        while any(alive(pid) for pid in self.pids()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in self.pids() if alive(pid)]


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.delenv("FAKE_VLLM_FAULTS", raising=False)
    lab = Lab(tmp_path)
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(lab.record))
    yield lab
    lab.assert_all_gone()


def stream(
    server: ServerProcess, max_tokens: int = 4, read_timeout: float = 10.0
) -> tuple[int, Events, bool]:
    """One streamed completion: (status, events, clean end); a read timeout ends it early."""
    conn = http.client.HTTPConnection(server.launch.host, server.launch.port, timeout=read_timeout)
    body = {"model": "fake", "prompt": "hello", "max_tokens": max_tokens, "stream": True}
    body["stream_options"] = {"include_usage": True}
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    events: Events = []
    try:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data: "):
                data = line[6:]
                events.append(data if data == "[DONE]" else json.loads(data))
    except TimeoutError:
        return resp.status, events, False
    finally:
        conn.close()
    return resp.status, events, True


def tokens(events: Events) -> int:
    return sum(1 for e in events if isinstance(e, dict) and e.get("choices"))


def concurrent_streams(server: ServerProcess, n: int) -> None:
    threads = [threading.Thread(target=stream, args=(server, 2)) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)


def state(server: ServerProcess) -> dict[str, Any]:
    return dict(json.loads(http_get(server.launch.base_url + "/fake/state")[1]))


def test_a_healthy_start_reads_like_vllm_and_honours_its_flags(lab: Lab) -> None:
    config = {"kv-cache-memory-bytes": "1G", "block-size": 32, "max-model-len": 2048}
    server = lab.healthy("ttft_ms=300", {**config, "max-num-seqs": 2})
    f = server.facts
    assert (f.kv_cache_tokens, f.max_concurrency, f.kv_cache_memory_gib) == (524288, 256.0, 1.0)
    assert (f.block_size, f.num_blocks, f.kv_cache_memory_bytes) == (32, 16384, GIB)
    assert f.max_concurrency_tokens_per_request == 2048 and f.enable_prefix_caching is True
    assert f.vllm_version == "0.32.0+fake" and f.weights_memory_gib == 0.25
    children = psutil.Process(server.pid).children()
    assert f.engine_pids == {"APIServer": server.pid, "EngineCore": children[0].pid}
    assert os.getpgid(children[0].pid) == server.pgid  # one group, as vLLM's
    assert "'max_num_seqs': 2" in server.log_path.read_text()
    status, events, clean = stream(server)
    assert status == 200 and clean and events[-1] == "[DONE]" and tokens(events) == 4
    assert events[-2]["usage"]["completion_tokens"] == 4
    concurrent_streams(server, 4)
    assert state(server)["max_running"] == 2  # max-num-seqs is a real limit


def test_an_ignored_flag_is_echoed_but_not_applied(lab: Lab) -> None:
    config = {"kv-cache-memory-bytes": "1G", "max-num-seqs": 2}
    faults = "ignore_flag=kv-cache-memory-bytes,ignore_flag=max_num_seqs,ttft_ms=300"
    server = lab.healthy(faults, config)
    default_bytes = int((8 * DEFAULTS["gpu_memory_utilization"] - 0.25) * GIB)
    assert server.facts.kv_cache_memory_bytes == default_bytes
    assert server.facts.kv_cache_tokens == default_bytes // 2048 // 16 * 16
    log = server.log_path.read_text()
    assert "'kv_cache_memory_bytes': 1073741824" in log  # vLLM echoes its argv
    concurrent_streams(server, 4)
    assert state(server)["max_running"] == 4


@pytest.mark.parametrize(
    ("faults", "config", "kind", "words"),
    [
        ("crash_at_start", {}, "engine_init", "RuntimeError: fake_vllm fault crash_at_start"),
        ("oom_at_start", {}, "out_of_memory", "CUDA out of memory"),
        ("", {"kv-cache-memory-bytes": "2M", "max-model-len": 2048}, "out_of_memory", "(2048)"),
    ],
    ids=["crash", "oom", "kv-smaller-than-one-request"],
)
def test_a_failed_start_is_classified(
    lab: Lab, faults: str, config: dict[str, Any], kind: str, words: str
) -> None:
    server = lab.start(faults, config)
    with pytest.raises(StartFailure) as failed:
        server.wait_healthy(timeout=20)
    assert failed.value.kind == kind and words in failed.value.reason
    assert failed.value.returncode == 1
    assert "Engine core initialization failed" in server.log_path.read_text()


def test_slow_start_times_out_and_start_delay_is_a_real_start_time(lab: Lab) -> None:
    slow = lab.start("slow_start=30")
    delayed = lab.start("start_delay=1.5")
    with pytest.raises(StartFailure) as failed:
        slow.wait_healthy(timeout=1.0)
    assert failed.value.kind == "timeout"
    facts = delayed.wait_healthy(timeout=20)
    assert (facts.init_engine_seconds or 0) >= 1.5 and (facts.time_to_healthy_s or 0) >= 1.5


def test_the_engine_dies_mid_run_while_the_api_server_stays_up(lab: Lab) -> None:
    server = lab.healthy("engine_dies_after=1.5,itl_ms=100")
    assert http_get(server.launch.base_url + "/health")[0] == 200
    status, events, clean = stream(server, max_tokens=40)  # 4 s of tokens; the engine dies at 1.5
    assert status == 200 and clean and 0 < tokens(events) < 40
    assert events[-2]["error"]["type"] == "EngineDeadError" and events[-1] == "[DONE]"
    assert http_get(server.launch.base_url + "/health")[0] == 503
    assert stream(server)[0] == 500
    assert server.alive() and not alive(server.facts.engine_pids["EngineCore"])
    assert "EngineDeadError" in server.log_path.read_text()


@pytest.mark.parametrize(
    ("faults", "expect"),
    [
        ("stall_after=2", "stall"),
        ("inband_error_after=2", "error"),
        ("truncate_after=2", "truncated"),
    ],
)
def test_stream_faults(lab: Lab, faults: str, expect: str) -> None:
    server = lab.healthy(faults)
    status, events, clean = stream(server, max_tokens=8, read_timeout=1.0)
    assert status == 200 and tokens(events) == 2
    if expect == "stall":  # the connection is held open, nothing more comes
        assert not clean and len(events) == 2
    elif expect == "error":
        assert clean and "error" in events[2] and events[3] == "[DONE]"
    else:
        assert clean and len(events) == 2 and "[DONE]" not in events


def test_http500_share(lab: Lab) -> None:
    server = lab.healthy("http500_share=0.5")
    assert [stream(server)[0] for _ in range(4)] == [200, 500, 200, 500]


def test_a_grandchild_that_ignores_sigterm_holds_the_port_until_a_group_sigkill(lab: Lab) -> None:
    server = lab.healthy("ignore_sigterm_grandchild")
    holder = json.loads(lab.record.read_text())["pids"]["holder"]
    assert server.pgid is not None and os.getpgid(holder) == server.pgid
    os.killpg(server.pgid, signal.SIGTERM)
    assert server.proc is not None and server.proc.wait(10) == 0
    time.sleep(0.3)
    assert alive(holder) and not port_is_free(server.launch.host, server.launch.port)
    server.stop(grace=0.5, timeout=10)  # escalates to SIGKILL on the group
    assert not alive(holder)


def test_a_grandchild_that_left_the_group_is_still_stopped(lab: Lab) -> None:
    server = lab.healthy("ignore_sigterm_grandchild=setsid")
    holder = json.loads(lab.record.read_text())["pids"]["holder"]
    assert os.getpgid(holder) != server.pgid
    server.stop(grace=0.5, timeout=10)
    assert not alive(holder)


def test_a_foreign_process_on_the_port_is_never_signalled(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    with foreign_listener() as foreign:
        server = ServerProcess(fake_launch(port=foreign.port), lab.tmp / "busy.log")
        with pytest.raises(StartFailure) as refused:  # checked before anything is started
            server.start()
        assert refused.value.kind == "port_in_use" and server.proc is None
        # The race (the port taken between the check and the bind): the fake exits, the failure
        # is port_in_use at once, and stop() does not wait for a port that was never ours.
        monkeypatch.setattr("tuning.engine.server.port_is_free", lambda host, port: True)
        raced = ServerProcess(fake_launch(port=foreign.port), lab.tmp / "raced.log")
        raced.start()
        with pytest.raises(StartFailure) as failed:  # waiting out the 20 s would say `timeout`
            raced.wait_healthy(timeout=20)
        assert failed.value.kind == "port_in_use"
        monkeypatch.undo()
        assert foreign.untouched()


def test_an_experiment_against_the_fake_goes_on_after_a_failed_value(
    lab: Lab, tmp_path: Path
) -> None:
    """`python -m tuning experiment` with the fake as the custom engine; value 4 crashes."""
    home = tmp_path / "home"
    env = {**os.environ, **fake_settings_env(home, faults="crash_at_start@max-num-seqs=4")}
    workload = ["--num-requests", "4", "--concurrency", "2", "--input-len", "8"]
    workload += ["--output-len", "4", "--num-warmups", "1", "--start-timeout", "240"]
    cmd = [
        sys.executable,
        "-m",
        "tuning",
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
    ]
    done = subprocess.run(
        [*cmd, "--values", "4,2", *workload, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with connect(home / "lab.db", readonly=True) as db:
        runs = {r["value"]: r for r in queries.list_runs(db, include_hidden=True)}
    assert runs["2"]["status"] == "done" and runs["2"]["summary"]["completed"] == 4
    assert runs["2"]["kv_cache_tokens"] > 0
    assert runs["4"]["status"] == "failed" and runs["4"]["failure_kind"] == "engine_init"
