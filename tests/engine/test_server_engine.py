"""The real embedded engine: start, health, KV capacity, stop with nothing left behind."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tuning.engine.procs import group_members
from tuning.engine.server import ServerProcess, StartFailure, http_get, port_is_free
from tuning.engine.spec import EngineSpec

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]


def _server(engine: EngineSpec, tmp_path: Path, **overrides: object) -> ServerProcess:
    config = {**engine.baseline, **overrides}
    return ServerProcess(engine.launch(config), tmp_path / "server.log")


def _assert_gone(server: ServerProcess, pids: list[int]) -> None:
    assert server.pgid is not None
    assert group_members(server.pgid) == []
    assert not any(
        psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids
    )
    assert port_is_free(server.launch.host, server.launch.port)
    assert server.ipc_dir is not None and not server.ipc_dir.exists()


def _sockets(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if stat.S_ISSOCK(p.lstat().st_mode)]


def test_start_health_kv_capacity_and_clean_stop(engine: EngineSpec, tmp_path: Path) -> None:
    server = _server(engine, tmp_path)
    server.start()
    try:
        facts = server.wait_healthy(timeout=300)
        assert http_get(server.launch.base_url + "/health")[0] == 200
        tree = [server.pid] + [c.pid for c in psutil.Process(server.pid).children(recursive=True)]
        assert len(tree) >= 3  # API server, EngineCore, Worker
        # KV capacity from the startup log and from /metrics agree.
        assert facts.kv_cache_tokens and facts.kv_cache_tokens > 0
        assert facts.cache_config.get("kv_cache_size_tokens")
        assert int(facts.cache_config["kv_cache_size_tokens"]) == facts.kv_cache_tokens
        assert facts.max_concurrency and facts.block_size == 128
        assert facts.kv_cache_memory_bytes == 2**30  # VLLM_CPU_KVCACHE_SPACE=1
        assert facts.time_to_healthy_s and facts.time_to_healthy_s > 1
        # vLLM bound its ZMQ sockets in the start's own folder, not in /tmp (tuning.engine.ipc_dir).
        assert server.ipc_dir is not None and _sockets(server.ipc_dir)
    finally:
        server.stop()
    _assert_gone(server, tree)


def test_block_size_16_is_a_classified_failure(engine: EngineSpec, tmp_path: Path) -> None:
    server = _server(engine, tmp_path, **{"block-size": 16})
    server.start()
    with pytest.raises(StartFailure) as err:
        server.wait_healthy(timeout=300)
    failure = err.value
    assert failure.kind == "engine_init"
    assert "No common block size for 16" in failure.reason
    assert "multiple of 32" in failure.hint
    assert failure.log_tail
    _assert_gone(server, [server.pid or 0])


def test_cli_server_start_status_stop(engine: EngineSpec, lab_home: Path) -> None:
    env = {**os.environ, "TUNING_LAB_HOME": str(lab_home)}

    def run(*a: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tuning", "server", *a],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )

    bad = run("start", "--set", "max-num-seqs=4;id")
    assert bad.returncode == 1 and "refused before starting anything" in bad.stdout
    started = run("start", "--set", "max-num-seqs=8", "--json")
    assert started.returncode == 0, started.stdout + started.stderr
    state = json.loads(started.stdout[started.stdout.index("{") :])
    assert state["facts"]["kv_cache_tokens"] > 0
    assert _sockets(Path(state["ipc_dir"]))  # the detached server's sockets, for `stop` to remove
    status = run("status", "--json")
    assert json.loads(status.stdout)["healthy"] is True
    stopped = run("stop")
    assert stopped.returncode == 0 and "is free" in stopped.stdout
    assert group_members(int(state["pgid"])) == []
    assert port_is_free("127.0.0.1", int(state["port"]))
    assert not Path(state["ipc_dir"]).exists()
    assert run("status").returncode == 1
