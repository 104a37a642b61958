"""The guard beside a fleet worker: when the worker dies, the servers it started (each in its own
session, as the lab starts servers) are stopped by group; a worker that ends normally leaves
nothing for the guard to do. Each test waits until the guard's report lists the tree before it
kills anything (a fixed sleep guessed how long the guard took to see it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from tests.checks import wait_until
from tuning.decide.fleet.guard import read_report
from tuning.engine.procs import pid_alive

# A "worker" that starts a server-like child in its own session (with a grandchild in the group)
# and prints the child's pid, then sleeps until killed; its guard reports to the file in argv[1].
_WORKER = """
import subprocess, sys, time
from pathlib import Path
from tuning.decide.fleet.guard import start_guard
guard = start_guard(report=Path(sys.argv[1]))
grandchild = "import time; time.sleep(300)"
server = f"import subprocess,sys,time; subprocess.Popen([sys.executable,'-c',{grandchild!r}]); "
child = subprocess.Popen([sys.executable, "-c", server + "time.sleep(300)"], start_new_session=True)
print(child.pid, guard.pid, flush=True)
time.sleep(300)
"""


def test_a_killed_worker_leaves_no_server_behind(tmp_path: Path) -> None:
    report = tmp_path / "seen"
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER, str(report)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    assert worker.stdout is not None
    server_pid, guard_pid = map(int, worker.stdout.readline().split())
    server = psutil.Process(server_pid)
    wait_until(lambda: len(server.children()) == 1, 30, "the server's child to start")
    grandchild = server.children()[0].pid
    wait_until(
        lambda: {server_pid, grandchild} <= set(read_report(report)),
        30,
        f"the guard to report the server {server_pid} and its child {grandchild}",
    )
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    wait_until(
        lambda: not pid_alive(server_pid) and not pid_alive(grandchild),
        30,
        "the guard to stop the dead worker's server and its child",
    )
    wait_until(lambda: not pid_alive(guard_pid), 30, "the guard to end once it has reaped")


# A "driver" that starts a cluster-like group the way `ray start` does (the starter exits, its
# daemon lives on in the group, not below the driver), guarded, then sleeps until killed.
_DRIVER = """
import subprocess, sys, time
from pathlib import Path
from tuning.decide.fleet.guard import start_guard
sleeper = "import time; time.sleep(300)"
daemon = f"import os, subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleeper!r}]); "
daemon += "os._exit(0)"
starter = subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True)
starter.wait()
guard = start_guard(None, [starter.pid], report=Path(sys.argv[1]))
print(starter.pid, guard.pid, flush=True)
time.sleep(300)
"""


def test_a_killed_driver_takes_its_local_cluster_group_with_it(tmp_path: Path) -> None:
    from tuning.engine.procs import group_alive

    report = tmp_path / "seen"
    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER, str(report)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
    )
    assert driver.stdout is not None
    pgid, guard_pid = map(int, driver.stdout.readline().split())
    wait_until(lambda: group_alive(pgid), 30, f"the cluster's group {pgid} to be alive")
    wait_until(
        lambda: pgid in read_report(report).values(),
        30,
        f"the guard to report the cluster's group {pgid}",
    )
    driver.send_signal(signal.SIGKILL)
    driver.wait(10)
    wait_until(lambda: not group_alive(pgid), 30, "the cluster's group to go with its driver")
    wait_until(lambda: not pid_alive(guard_pid), 30, "the guard to end once it has reaped")


def test_a_server_the_guard_never_polled_is_found_by_its_workers_mark(tmp_path: Path) -> None:
    """A fresh-clone run leaked a fleet server (alive 518 s after its driver was SIGKILLed): it was
    started after the guard's last poll of the worker's tree and, its worker gone, reparented to
    init. A worker marks its environment (OWNER_ENV) and its servers inherit the mark; the guard,
    when its worker is gone, stops every process carrying it. Here the "server" has left the
    worker's tree before any poll: only the mark can find it."""
    from tuning.decide.fleet.guard import OWNER_ENV, marked, owner_mark, reap_orphans

    mark = owner_mark(12345, 1.0)
    stray = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, OWNER_ENV: mark},
        start_new_session=True,
    )
    other = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={**os.environ, OWNER_ENV: owner_mark(12345, 2.0)},  # another worker's (a reused pid)
        start_new_session=True,
    )
    try:
        wait_until(lambda: OWNER_ENV in psutil.Process(stray.pid).environ(), 30, "its environment")
        seen: dict[int, tuple[float, int]] = {}
        marked(mark, seen)
        assert set(seen) == {stray.pid}
        reap_orphans(seen, grace=2.0)
        assert stray.wait(timeout=30) is not None
        assert other.poll() is None
    finally:
        for proc in (stray, other):
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


# A fleet worker as RunWorker is: its mark in its environment, a detached guard, one server; on
# a line on stdin it starts one more server (the next run) and prints its pid.
_RAY_WORKER = """
import os, subprocess, sys, time
import psutil
from tuning.decide.fleet.guard import OWNER_ENV, owner_mark, start_detached_guard
os.environ[OWNER_ENV] = owner_mark(os.getpid(), psutil.Process().create_time())
guard = start_detached_guard()
server = [sys.executable, "-c", "import time; time.sleep(300)"]
first = subprocess.Popen(server, start_new_session=True)
print(first.pid, guard.pid, flush=True)
sys.stdin.readline()
print(subprocess.Popen(server, start_new_session=True).pid, flush=True)
time.sleep(300)
"""


def test_a_server_started_after_ray_killed_the_workers_children_is_still_stopped(
    tmp_path: Path,
) -> None:
    """Two fresh-clone runs (2026-12-05) left a fleet server alive 120 s after its driver was
    SIGKILLed. Ray ends an actor whose owner died by killing the worker's direct children, then
    the worker: a guard among those children died first, and a server the worker started in
    between (its next run, dispatched just before the driver died) lived on. Here Ray's two steps
    are played in that order, with the late server between them."""
    from tuning.decide.fleet.guard import REPORTS_ENV

    worker = subprocess.Popen(
        [sys.executable, "-c", _RAY_WORKER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=os.getcwd(),
        env={**os.environ, REPORTS_ENV: str(tmp_path)},
    )
    assert worker.stdin is not None and worker.stdout is not None
    first, guard_pid = map(int, worker.stdout.readline().split())
    late = 0
    try:
        assert guard_pid not in {c.pid for c in psutil.Process(worker.pid).children()}
        report = tmp_path / f"guard-{worker.pid}.txt"
        wait_until(lambda: first in read_report(report), 30, "the guard to report the server")
        for child in psutil.Process(worker.pid).children():  # Ray's KillChildProcs
            child.kill()
        worker.stdin.write("next run\n")
        worker.stdin.flush()
        late = int(worker.stdout.readline())
        worker.kill()  # Ray's QuickExit
        worker.wait(10)
        wait_until(lambda: not pid_alive(late), 30, "the guard to stop the late server")
        wait_until(lambda: not pid_alive(guard_pid), 30, "the guard to end once it has reaped")
    finally:
        for pid in (late, first, guard_pid):
            if pid and pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
