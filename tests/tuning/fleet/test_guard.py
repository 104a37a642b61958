"""The guard beside a fleet worker: when the worker dies, the servers it started (each in its own
session, as the lab starts servers) are stopped by group; a worker that ends normally leaves
nothing for the guard to do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil

from tuning.procs import pid_alive

# A "worker" that starts a server-like child in its own session (with a grandchild in the group)
# and prints the child's pid, then sleeps until killed.
_WORKER = """
import subprocess, sys, time
from tuning.fleet.guard import start_guard
guard = start_guard()
grandchild = "import time; time.sleep(300)"
server = f"import subprocess,sys,time; subprocess.Popen([sys.executable,'-c',{grandchild!r}]); "
child = subprocess.Popen([sys.executable, "-c", server + "time.sleep(300)"], start_new_session=True)
print(child.pid, guard.pid, flush=True)
time.sleep(300)
"""


def _wait(cond, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return False


def test_a_killed_worker_leaves_no_server_behind() -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", _WORKER], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert worker.stdout is not None
    server_pid, guard_pid = map(int, worker.stdout.readline().split())
    server = psutil.Process(server_pid)
    assert _wait(lambda: len(server.children()) == 1)
    grandchild = server.children()[0].pid
    time.sleep(1.0)  # the guard has seen the tree
    worker.send_signal(signal.SIGKILL)
    worker.wait(10)
    assert _wait(lambda: not pid_alive(server_pid) and not pid_alive(grandchild))
    assert _wait(lambda: not pid_alive(guard_pid))  # the guard ends once it has reaped


# A "driver" that starts a cluster-like group the way `ray start` does (the starter exits, its
# daemon lives on in the group, not below the driver), guarded, then sleeps until killed.
_DRIVER = """
import subprocess, sys, time
from tuning.fleet.guard import start_guard
sleeper = "import time; time.sleep(300)"
daemon = f"import os, subprocess, sys; subprocess.Popen([sys.executable, '-c', {sleeper!r}]); "
daemon += "os._exit(0)"
starter = subprocess.Popen([sys.executable, "-c", daemon], start_new_session=True)
starter.wait()
guard = start_guard(None, [starter.pid])
print(starter.pid, guard.pid, flush=True)
time.sleep(300)
"""


def test_a_killed_driver_takes_its_local_cluster_group_with_it() -> None:
    from tuning.procs import group_alive

    driver = subprocess.Popen(
        [sys.executable, "-c", _DRIVER], stdout=subprocess.PIPE, text=True, cwd=os.getcwd()
    )
    assert driver.stdout is not None
    pgid, guard_pid = map(int, driver.stdout.readline().split())
    assert _wait(lambda: group_alive(pgid))
    time.sleep(0.5)
    driver.send_signal(signal.SIGKILL)
    driver.wait(10)
    assert _wait(lambda: not group_alive(pgid)), "the cluster's group outlived its driver"
    assert _wait(lambda: not pid_alive(guard_pid))
