"""Resident engines on a CPU vLLM (issue 38, item 4): a server the lab started is parked by pausing
its process group (SIGSTOP) and woken by continuing it (SIGCONT) and one /health; which flags and
systems may pause, and whether a second server fits in RAM beside a paused one (in numbers).

A stopped process acts on SIGTERM only once continued: every path that stops a server
(ServerProcess.stop, stop_group under the reaper, `server stop` and the fleet's guard) must stop
a paused one at once and gracefully (the fake writes `exit` to its FAKE_VLLM_AWAKE record only
when it ends on its SIGTERM, never on a SIGKILL after the grace)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.fakes.engines import fake_launch
from tests.fakes.fake_vllm_server import AWAKE_ENV
from tuning.engine import pause
from tuning.engine.procs import pid_alive, stop_group
from tuning.engine.server import ServerProcess, http_get
from tuning.engine.sleep_mode import why_not

GRACE_S = 8.0  # what a stop would wait before SIGKILL if the paused server ignored its SIGTERM


@pytest.fixture
def awake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    record = tmp_path / "awake.jsonl"
    monkeypatch.setenv(AWAKE_ENV, str(record))
    return record


@pytest.fixture
def paused(tmp_path: Path, awake: Path) -> Iterator[ServerProcess]:
    """A healthy fake server, paused."""
    server = ServerProcess(fake_launch({"max-num-seqs": 4}), tmp_path / "server.log")
    with server:
        server.wait_healthy(timeout=60)
        assert pause.requests_in_flight(server.launch.base_url) == 0  # idle: nothing to drain
        pause.pause(server.pgid or 0)
        yield server


def _exits(record: Path) -> set[int]:
    lines = record.read_text().splitlines() if record.exists() else []
    return {x["pid"] for x in map(json.loads, lines) if x["event"] == "exit"}


def _stopped_gracefully(
    server: ServerProcess, record: Path, took: float, grace: float = GRACE_S
) -> None:
    assert server.pid is not None and not pid_alive(server.pid)
    assert server.pid in _exits(record), "ended by SIGKILL, not by its SIGTERM"
    assert took < grace, f"{took:.1f} s: the SIGKILL grace was waited"


def test_a_paused_server_is_stopped_and_a_continued_one_answers(
    paused: ServerProcess,
) -> None:
    pid = paused.pid or 0
    assert pause.is_stopped(pid)
    assert all(p.status() == psutil.STATUS_STOPPED for p in psutil.Process(pid).children())
    took = pause.resume(paused.pgid or 0, paused.launch.base_url)
    assert not pause.is_stopped(pid) and took >= 0
    assert http_get(paused.launch.base_url + "/health")[0] == 200


def _by_server_stop(server: ServerProcess) -> None:
    server.stop(grace=GRACE_S)


def _by_stop_group(server: ServerProcess) -> None:  # the reaper's, `server stop`'s path
    stop_group(server.pgid or 0, grace=GRACE_S)


def _by_the_guard(server: ServerProcess) -> None:  # the fleet guard's orphan reaper
    from tuning.decide.fleet.guard import reap_orphans

    pid = server.pid or 0
    reap_orphans({pid: (psutil.Process(pid).create_time(), pid)}, grace=GRACE_S)


@pytest.mark.parametrize("stop", [_by_server_stop, _by_stop_group, _by_the_guard])
def test_every_stop_path_ends_a_paused_server_at_once(
    paused: ServerProcess, awake: Path, stop: Callable[[ServerProcess], None]
) -> None:
    t0 = time.monotonic()
    stop(paused)
    if paused.proc is not None:
        paused.proc.wait(10)  # reaped (the group's leader is our child)
    _stopped_gracefully(paused, awake, time.monotonic() - t0)


def test_the_reaper_stops_a_server_a_dead_runner_left_paused(
    paused: ServerProcess, awake: Path, lab_home: Path
) -> None:
    from tests.fakes.engines import fake_spec
    from tests.tuning.experiment.test_resident import QUICK, left_by_a_dead_runner
    from tuning.experiment.plan import plan_experiment
    from tuning.experiment.spec import ExperimentSpec
    from tuning.experiment.supervisor import reap

    db_path = lab_home / "lab.db"
    spec = ExperimentSpec.build(
        param="max-num-seqs",
        values=[2, 16],
        repeats=2,
        workload=QUICK,
        engine=fake_spec(backend="cpu"),
    )
    exp_id = plan_experiment(db_path, spec)
    resident = {"asked": "auto", "used": True, "parked": "paused"}
    left_by_a_dead_runner(db_path, exp_id, paused, resident)
    t0 = time.monotonic()
    (item,) = reap(db_path)
    assert item.servers_stopped == [paused.pid]
    assert paused.proc is not None and paused.proc.wait(10) is not None
    _stopped_gracefully(paused, awake, time.monotonic() - t0, grace=15.0)  # stop_group's default


def test_a_server_with_requests_in_flight_is_not_paused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pause, "requests_in_flight", lambda url: 3)
    with pytest.raises(pause.PauseError, match="3 request"):
        pause.drain("http://127.0.0.1:1", timeout=0.2)


def test_which_cpu_flags_may_pause() -> None:
    assert why_not("max-num-seqs", "cpu", None) is None  # no sleep mode needed: no flags read
    for flag in ("VLLM_CPU_KVCACHE_SPACE", "kv-cache-memory-bytes", "block-size"):
        assert f"{flag} sizes the engine's memory" in (why_not(flag, "cpu", None) or "")
    assert "CUDA (sleep mode) or a CPU vLLM" in (why_not("max-num-seqs", "tpu", None) or "")


def test_pausing_needs_a_posix_system(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pause, "SYSTEM", "nt")
    assert "needs a POSIX system" in (why_not("max-num-seqs", "cpu", None) or "")


def test_a_second_server_must_fit_in_ram_beside_a_paused_one() -> None:
    gib = 2**30
    assert pause.why_short(2 * gib, 3 * gib) is None
    short = pause.why_short(2 * gib, int(2.1 * gib)) or ""
    assert "2.10 GiB available" in short and "holds 2.00 GiB" in short
    assert "2.50 GiB needed" in short


def test_tree_rss_counts_the_engine_child(paused: ServerProcess) -> None:
    pid = paused.pid or 0
    leader = psutil.Process(pid).memory_info().rss
    assert pause.tree_rss(pid) > leader > 0
    assert pause.tree_rss(2**22 + 12345) == 0  # gone: nothing
