"""The server process: startup-log parsing and failure classification on logs the real engine
wrote, and ServerProcess as a context that stops its whole group."""

from __future__ import annotations

import sys
import tracemalloc
from pathlib import Path

from tests.checks import wait_for
from tests.fakes.engines import fake_launch
from tuning.engine.launch import Launch, free_port
from tuning.engine.params import FORCED_HOST
from tuning.engine.procs import group_members
from tuning.engine.server import (
    HINTS,
    ServerProcess,
    StartFailure,
    classify_failure,
    parse_cache_config,
    parse_startup_log,
    port_is_free,
)

DATA = Path(__file__).resolve().parents[1] / "data"
REAL_TOKENS = 3_643_792  # the fake vLLM's KV cache at its defaults (8 GiB x 0.9 - 0.25 GiB)
# Answers 200 to every GET, like a healthy server; it starts a grandchild to prove the group dies.
_TINY_SERVER = """
import http.server, subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer((sys.argv[1], int(sys.argv[2])), H).serve_forever()
"""


def test_parse_real_startup_log() -> None:
    facts = parse_startup_log((DATA / "startup_ok.log").read_text())
    assert facts.kv_cache_tokens == 524288
    assert facts.max_concurrency == 256.0
    assert facts.max_concurrency_tokens_per_request == 2048
    assert facts.kv_cache_memory_gib == 1.0
    assert facts.vllm_version == "0.32.0"
    assert set(facts.engine_pids) >= {"APIServer", "EngineCore", "Worker"}
    assert "GiB for KV cache" in (facts.memory_line or "")


def test_parse_gpu_style_lines() -> None:
    text = (
        "(EngineCore pid=9) INFO [kv_cache_utils.py:1] GPU KV cache size: 4,129,184 tokens, "
        "Maximum concurrency for 2,048 tokens per request: 2016.20x\n"
        "(EngineCore pid=9) INFO Model loading took 2.35 GiB memory and 3.1 seconds\n"
        "(EngineCore pid=9) INFO Available KV cache memory: 126.04 GiB\n"
    )
    facts = parse_startup_log(text)
    assert facts.kv_cache_tokens == 4129184 and facts.max_concurrency == 2016.2
    assert facts.weights_memory_gib == 2.35 and facts.kv_cache_memory_gib == 126.04


def test_cache_config_from_real_metrics() -> None:
    labels = parse_cache_config((DATA / "real_metrics.txt").read_text())
    assert labels["block_size"] == "128"
    assert int(labels["kv_cache_size_tokens"]) == 524288


def test_block_size_16_is_an_engine_init_failure_with_the_engines_reason() -> None:
    kind, reason = classify_failure((DATA / "startup_block16.log").read_text(), 1)
    assert kind == "engine_init"
    assert "No common block size for 16" in reason and reason.startswith("ValueError")


def test_argparse_exit_is_an_invalid_argument() -> None:
    kind, reason = classify_failure((DATA / "startup_badarg.log").read_text(), 2)
    assert kind == "invalid_argument"
    assert "--bogus-flag" in reason


def test_other_kinds() -> None:
    assert classify_failure("OSError: [Errno 98] Address already in use", 1)[0] == "port_in_use"
    oom = (
        "ValueError: To serve at least one request with the model's max seq len (8192), "
        "(1.0 GiB KV cache is needed, which is larger than the available KV cache memory "
        "(0.5 GiB). Try increasing `gpu_memory_utilization`\n"
        "RuntimeError: Engine core initialization failed. See root cause above."
    )
    kind, reason = classify_failure(oom, 1)
    assert kind == "out_of_memory" and "max seq len" in reason
    assert (
        classify_failure("torch.OutOfMemoryError: CUDA out of memory. Tried", 1)[0]
        == "out_of_memory"
    )
    assert classify_failure("", -9) == ("crashed", "the server exited with code -9")
    for kind in ("invalid_argument", "engine_init", "out_of_memory", "port_in_use", "timeout"):
        assert len(HINTS[kind]) > 40


def test_version_from_the_engine_line_when_the_logo_hides_it() -> None:
    text = (
        "(EngineCore pid=682) INFO 12-02 18:35:02 [core.py:114] Initializing a V1 LLM engine "
        "(v0.25.0) with config: model='/root/acc/gpu-model'"
    )
    assert parse_startup_log(text).vllm_version == "0.25.0"
    assert parse_startup_log(text).engine_pids == {"EngineCore": 682}


def test_server_process_as_a_context_stops_its_whole_group(tmp_path: Path) -> None:
    port = free_port()
    launch = Launch(
        argv=[sys.executable, "-c", _TINY_SERVER, FORCED_HOST, str(port)],
        env={},
        host=FORCED_HOST,
        port=port,
    )
    with ServerProcess(launch, tmp_path / "server.log") as server:
        facts = server.wait_healthy(timeout=30)
        assert facts.time_to_healthy_s is not None
        assert server.alive() and server.pgid is not None
        assert wait_for(lambda: len(group_members(server.pgid or 0)) == 2)
    assert not server.alive()
    assert group_members(server.pgid) == []
    assert port_is_free(FORCED_HOST, port)
    server.stop()  # a second stop is a no-op, never a signal to a group id reused since


def test_a_server_that_took_our_port_is_not_taken_for_ours(tmp_path: Path) -> None:
    """On a shared machine another server can bind the port while our engine is still importing:
    its 200 from /health must not pass for our start (nor its /metrics for our KV cache)."""
    import subprocess

    port = free_port()
    slow = Launch(  # our "engine": alive, never binds
        argv=[sys.executable, "-c", "import time; time.sleep(60)"],
        env={},
        host=FORCED_HOST,
        port=port,
    )
    server = ServerProcess(slow, tmp_path / "ours.log")
    server.start()
    other = subprocess.Popen(
        [sys.executable, "-c", _TINY_SERVER, FORCED_HOST, str(port)], start_new_session=True
    )
    try:
        assert wait_for(lambda: not port_is_free(FORCED_HOST, port))
        try:
            server.wait_healthy(timeout=3)
        except StartFailure as failure:
            assert failure.kind == "timeout"
        else:
            raise AssertionError("another process's /health passed for our server")
    finally:
        server.stop(port_was_ours=False)
        other.kill()
        other.wait()


def test_the_tail_of_a_huge_log_is_read_from_its_end(tmp_path: Path) -> None:
    """Issue 41, case 8: each run's tail (200 lines, twice a run) read and split the whole log: a
    200 MB log cost 770 MB. Now it is read from the end, whatever the size of what comes before."""
    log = tmp_path / "s.log"
    with open(log, "w") as fh:
        fh.write("(APIServer pid=6) INFO " + "x" * 60_000_000 + "\n")
        fh.writelines(f"(APIServer pid=6) INFO line {i}\n" for i in range(500))
    server = ServerProcess(Launch(argv=["true"], env={}, host=FORCED_HOST, port=9), log)
    tracemalloc.start()
    try:
        got = server.log_tail(200)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    lines = got.splitlines()
    assert len(lines) == 200 and lines[-1] == "(APIServer pid=6) INFO line 499"
    assert peak < 4_000_000  # the log is 60 MB


def test_lines_of_a_pid_outside_the_launch_are_never_facts(tmp_path: Path) -> None:
    """Issue 41, case 2: an engine printed vLLM-like lines (as pid 1) before vLLM's own, and the
    first matching line gave KV tokens 999,999,999, version 9.9.9-evil and pids 1."""
    with ServerProcess(fake_launch(None, "fake_lines=foreign"), tmp_path / "s.log") as server:
        facts = server.wait_healthy(timeout=30)
    assert facts.kv_cache_tokens == REAL_TOKENS
    assert facts.vllm_version == "0.32.0+fake"
    assert facts.kv_cache_memory_gib is not None and facts.kv_cache_memory_gib < 100
    assert 1 not in facts.engine_pids.values()
    launched = server.pids
    assert set(facts.engine_pids.values()) <= launched
    assert facts.engine_pids["EngineCore"] != facts.engine_pids["APIServer"]
    assert facts.log_read["foreign_lines"] == 3 and facts.log_read["foreign_pids"] == [1]
    assert facts.log_conflicts == []  # lines of another pid are ignored, not weighed
