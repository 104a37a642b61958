"""No stuck or false states (issue 11, items 5 and 10): every way out of a runner writes a terminal
status, the heartbeat outlives a failed write, dead runners are reaped by pid *and* start time,
an experiment resumes where it stopped, and the CLI's exit code says how it ended."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from core.clock import now_iso
from store import connect, queries, repo
from tests.checks import wait_until
from tests.factories import plan_attached
from tests.fakes.engines import fake_settings_env
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.engine import ipc_dir
from tuning.experiment import runner as runner_module
from tuning.experiment.lock import machine_lock
from tuning.experiment.run_unit import RunUnit
from tuning.experiment.runner import run_experiment
from tuning.experiment.supervisor import cancel_experiment, reap_stale
from tuning.measure.traffic.workload import Workload

REPO = Path(__file__).resolve().parents[3]
SLOW = Workload(num_requests=400, concurrency=2, input_len=4, output_len=50, num_warmups=0)
QUICK = Workload(num_requests=4, concurrency=2, input_len=4, output_len=4, num_warmups=0)


@pytest.fixture
def slow_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeConfig(model="m", itl_ms=20.0)) as srv:
        yield srv


@pytest.fixture
def quick_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeConfig(model="m")) as srv:
        yield srv


def attached(
    db: Path, srv: FakeOpenAIServer | str, wl: Workload, values: list[int], repeats: int = 1
) -> int:
    url = srv if isinstance(srv, str) else srv.base_url
    return plan_attached(db, "concurrency", values, wl, base_url=url, repeats=repeats)


def _ctrl_c_as_in_a_terminal() -> None:
    """A suite started in the background (`cmd &` in a script, nohup) inherits SIGINT ignored,
    and Python then keeps ignoring it: the Ctrl-C test hung there until its timeout. The CLI
    under test gets the terminal's default back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args: str, env: dict[str, str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
        **kw,
    )


def wait_phase(db_path: Path, exp_id: int, phase: str, timeout: float = 60) -> None:
    def reached() -> bool:
        try:
            with connect(db_path, readonly=True) as db:
                return bool(queries.get_experiment(db, exp_id)["phase"] == phase)
        except Exception:  # noqa: BLE001 (the DB may not be written yet)
            return False

    wait_until(reached, timeout, f"experiment {exp_id} to reach phase {phase}", poll=0.1)


def rows(db_path: Path, exp_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        return exp, queries.list_runs(db, exp_id, include_hidden=True)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_experiment_is_cancelled_with_its_run(
    no_leftovers: Path, slow_server: FakeOpenAIServer, sig: signal.Signals
) -> None:
    lab_home = no_leftovers
    db_path = lab_home / "lab.db"
    proc = cli(
        "experiment",
        "--repeats",
        "1",
        "--base-url",
        slow_server.base_url,
        "--model",
        "m",
        "--param",
        "concurrency",
        "--values",
        "2,4",
        "--num-requests",
        "400",
        "--output-len",
        "50",
        "--input-len",
        "4",
        "--num-warmups",
        "0",
        "--db",
        str(db_path),
        "--json",
        env={"TUNING_LAB_HOME": str(lab_home), "TUNING_LAB_LOCK": str(lab_home / "lock")},
    )
    wait_phase(db_path, 1, "loading")
    wait_until(lambda: slow_server.stats.requests >= 1, 60, "the load's first request")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)  # a loaded machine stops slowly
    assert proc.returncode == 130, err
    assert "--resume 1" in err
    exp, runs = rows(db_path, 1)
    assert exp["status"] == "cancelled" and "interrupted" in exp["error"]
    assert len(runs) == 1 and runs[0]["status"] == "cancelled"  # not left running
    assert "interrupted" in runs[0]["failure_reason"]


def test_an_exception_in_a_value_fails_that_run_and_the_next_value_runs(
    lab_home: Path, quick_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path = lab_home / "lab.db"
    exp_id = attached(db_path, quick_server, QUICK, [2, 4, 8])
    real = RunUnit._ensure_server
    errors = iter(
        [sqlite3.OperationalError("database is locked"), RuntimeError("port 8000 still busy")]
    )

    def flaky(self: RunUnit, *args: Any, **kw: Any) -> tuple[str, float]:
        error = next(errors, None)
        if error is not None:
            raise error
        return real(self, *args, **kw)

    monkeypatch.setattr(RunUnit, "_ensure_server", flaky)
    run_experiment(db_path, exp_id)
    exp, runs = rows(db_path, exp_id)
    got = [(r["value"], r["status"], r["failure_kind"]) for r in runs]
    assert got == [
        ("2", "failed", "store_error"),
        ("4", "failed", "lab_error"),
        ("8", "done", None),
    ]
    assert "database is locked" in runs[0]["failure_reason"]
    assert exp["status"] == "done" and exp["runs_done"] == 1


def test_the_heartbeat_survives_failed_writes_and_stop_is_still_seen(
    lab_home: Path, slow_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heartbeat writes that fail (a locked DB) must not end the heartbeat: Stop is still read."""
    monkeypatch.setattr(runner_module, "HEARTBEAT_S", 0.2)
    db_path = lab_home / "lab.db"
    exp_id = attached(db_path, slow_server, SLOW, [2, 4])
    real = queries.cancel_requested
    failures = {"left": 3}

    def locked_in_the_heartbeat(db: Any, experiment_id: int) -> bool:
        if threading.current_thread().name != "runner" and failures["left"] > 0:
            failures["left"] -= 1
            raise sqlite3.OperationalError("database is locked")
        return real(db, experiment_id)

    monkeypatch.setattr(queries, "cancel_requested", locked_in_the_heartbeat)
    worker = threading.Thread(target=run_experiment, args=(db_path, exp_id), name="runner")
    worker.start()
    wait_phase(db_path, exp_id, "loading")
    wait_until(lambda: failures["left"] == 0, 30, "three heartbeat writes to fail")
    cancel_experiment(db_path, exp_id)
    worker.join(timeout=60)
    assert not worker.is_alive(), "the runner never saw Stop"
    assert failures["left"] == 0
    exp, runs = rows(db_path, exp_id)
    # The run is cancelled; until item 4's write retries land, a real lock between the runner's
    # and the Stop writer's commits can instead fail it as store_error: terminal either way.
    assert exp["status"] == "cancelled" and len(runs) == 1
    assert runs[0]["status"] == "cancelled" or runs[0]["failure_kind"] == "store_error"


def test_heartbeat_retries_and_reopens_after_errors(tmp_path: Path) -> None:
    from tuning.experiment.watch import Heartbeat

    calls: list[Any] = []  # the connections themselves: an id() is reused once one is freed

    def beat(db: Any) -> None:
        calls.append(db)
        if len(calls) <= 4:
            raise sqlite3.OperationalError("database is locked")

    hb = Heartbeat(tmp_path / "x.db", beat, period=0.02)
    hb.start()
    try:
        wait_until(lambda: len(calls) >= 8, 10, "8 heartbeats (4 failed, then 4 more)")
    finally:
        hb.stop()
    assert len(calls) >= 8 and hb.failures == 0  # it went on, and recovered
    first = calls[0]
    assert all(c is first for c in calls[:3]) and calls[3] is not first  # a fresh one after 3


@pytest.fixture
def foreign() -> Iterator[psutil.Process]:
    """A process of someone else's (its own session) whose pid the DB will claim as the lab's."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    try:
        yield psutil.Process(proc.pid)
    finally:
        proc.kill()
        proc.wait(10)


def running_experiment(db_path: Path, **exp_fields: Any) -> tuple[int, int]:
    exp_id = plan_attached(db_path, "concurrency", [1, 2], QUICK)
    with connect(db_path) as db:
        run_id = repo.create_run(
            db, experiment_id=exp_id, seq=0, param="concurrency", value="1", status="running"
        )
        repo.update_experiment(db, exp_id, status="running", heartbeat_at=now_iso(), **exp_fields)
    return exp_id, run_id


def test_a_reused_runner_pid_is_reaped_and_never_signalled(
    lab_home: Path, foreign: psutil.Process
) -> None:
    """The runner died and the kernel gave its pid to another process: the experiment is reaped
    at once (no 20 s wait), and neither that process nor a server pid claimed by it is touched."""
    db_path = lab_home / "lab.db"
    born = foreign.create_time()
    exp_id, run_id = running_experiment(
        db_path, runner_pid=foreign.pid, runner_start_time_s=born - 3600
    )
    with connect(db_path) as db:
        repo.update_run(db, run_id, server_pid=foreign.pid, server_start_time_s=born - 3600)
    assert reap_stale(db_path) == [exp_id]
    exp, runs = rows(db_path, exp_id)
    assert exp["status"] == "failed" and runs[0]["failure_kind"] == "runner_died"
    assert foreign.is_running() and foreign.status() != psutil.STATUS_ZOMBIE
    assert foreign.create_time() == born


def test_a_live_runner_with_its_start_time_is_left_alone(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    me = psutil.Process()
    exp_id, _ = running_experiment(db_path, runner_pid=me.pid, runner_start_time_s=me.create_time())
    with connect(db_path) as db:  # even with an old heartbeat: it is alive and it is ours
        repo.update_experiment(db, exp_id, heartbeat_at="2026-01-01T00:00:00+00:00")
    assert reap_stale(db_path) == []


def test_a_dead_runners_server_is_stopped_when_provably_ours(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    folder = ipc_dir.create()  # its sockets' folder, as ServerProcess.start gives every server
    server = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        start_new_session=True,
        env={**os.environ, ipc_dir.VAR: str(folder)},
    )
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        exp_id, run_id = running_experiment(
            db_path, runner_pid=dead.pid, runner_start_time_s=time.time() - 5
        )
        with connect(db_path) as db:
            repo.update_run(
                db,
                run_id,
                server_pid=server.pid,
                server_start_time_s=psutil.Process(server.pid).create_time(),
            )
        proc = cli("reap", "--db", str(db_path), "--json")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        [item] = json.loads(out)
        assert item["experiment_id"] == exp_id and item["servers_stopped"] == [server.pid]
        assert server.wait(10) is not None
        assert not folder.exists()  # removed with the server it stopped
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        ipc_dir.remove(folder)


def test_every_cli_start_reaps_dead_runners(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    exp_id, _ = running_experiment(
        db_path, runner_pid=dead.pid, runner_start_time_s=time.time() - 5
    )
    proc = cli(
        "experiment",
        "--repeats",
        "1",
        "--param",
        "concurrency",
        "--values",
        "0",
        "--db",
        str(db_path),
    )  # refused (a bad value), but the dead runner is reaped first
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert f"reaped experiment {exp_id}" in err
    assert rows(db_path, exp_id)[0]["status"] == "failed"


def test_resume_runs_only_what_is_left(
    lab_home: Path, quick_server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=4, concurrency=2, input_len=4, output_len=4, num_warmups=0)
    exp_id = attached(db_path, quick_server, wl, [2, 4], repeats=2)
    real = RunUnit.run

    def interrupted_at_the_third(self: RunUnit, seq: int, *args: Any) -> int:
        if seq == 2:
            raise KeyboardInterrupt
        return real(self, seq, *args)

    monkeypatch.setattr(RunUnit, "run", interrupted_at_the_third)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(db_path, exp_id)
    monkeypatch.undo()
    exp, before = rows(db_path, exp_id)
    assert exp["status"] == "cancelled" and [r["status"] for r in before] == ["done", "done"]
    proc = cli(
        "experiment",
        "--resume",
        str(exp_id),
        "--db",
        str(db_path),
        "--json",
        env={"TUNING_LAB_HOME": str(lab_home), "TUNING_LAB_LOCK": str(lab_home / "lock")},
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert result["status"] == "done" and len(result["run_ids"]) == 2
    exp, after = rows(db_path, exp_id)
    assert [(r["seq"], r["repeat_index"], r["status"]) for r in after] == [
        (0, 0, "done"),
        (1, 0, "done"),
        (2, 1, "done"),
        (3, 1, "done"),
    ]
    assert [r["id"] for r in after[:2]] == [r["id"] for r in before]  # kept, not run again
    assert exp["status"] == "done" and exp["runs_done"] == 4
    again = cli("experiment", "--resume", str(exp_id), "--db", str(db_path))
    out, _ = again.communicate(timeout=60)
    assert again.returncode == 0 and "nothing to resume" in out


def test_a_repeat_count_below_one_is_refused(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    with pytest.raises(ValueError, match="repeats"):
        attached(db_path, "http://127.0.0.1:9", QUICK, [2], repeats=0)
    proc = cli(
        "experiment",
        "--base-url",
        "http://127.0.0.1:9",
        "--param",
        "concurrency",
        "--values",
        "2",
        "--repeats",
        "-5",
        "--db",
        str(db_path),
    )
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "argument --repeats: must be at least 1, got -5" in err
    assert not db_path.exists()  # refused by the parser, before anything was opened


def test_an_experiment_whose_every_run_failed_fails_with_a_reason(no_leftovers: Path) -> None:
    lab_home = no_leftovers
    env = fake_settings_env(lab_home, faults="crash_at_start")
    proc = cli(
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
        "--values",
        "2,4",
        "--json",
        env=env,
    )
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert "every run failed (engine_init x2)" in err
    assert json.loads(out.strip().splitlines()[-1])["status"] == "failed"
    exp, runs = rows(lab_home / "lab.db", 1)
    assert exp["status"] == "failed" and exp["error"].startswith("every run failed")
    assert [r["failure_kind"] for r in runs] == ["engine_init", "engine_init"]


def test_a_refused_start_leaves_no_queued_experiment(
    lab_home: Path, quick_server: FakeOpenAIServer
) -> None:
    db_path = lab_home / "lab.db"
    exp_id = attached(db_path, quick_server, QUICK, [2])
    with machine_lock():
        proc = cli("run-experiment", "--experiment", str(exp_id), "--db", str(db_path))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1  # refused (busy): exit codes 0, 1, 2, 130 only
    exp, _ = rows(db_path, exp_id)
    assert exp["status"] == "failed" and "refused" in exp["error"]
