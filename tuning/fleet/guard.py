"""A watchdog beside each fleet worker: when the worker dies (killed, its node's Ray stopped, its
driver gone) the servers it started die too.

Ray's own cancel and kill stop the worker process only; a vLLM server started in its own session
(as the lab starts every server) would live on, holding its GPU and port. The guard runs in a
session of its own, remembers every process below the worker (and their process groups) while
the worker lives, and once the worker is gone stops those groups by group with escalation, then
any remembered process left, each checked by start time so a reused pid is never signalled.

    python -m tuning.fleet.guard WORKER_PID [PGID ...]

With PGIDs it also stops those groups when the worker dies: a driver's local Ray cluster (its
`ray start` processes are not below the driver) goes when the driver is killed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tuning.procs import pid_alive, same_process, stop_group

POLL_S = 0.2


def _snapshot(worker: psutil.Process, seen: dict[int, tuple[float, int]]) -> None:
    """Add every live descendant of `worker` to `seen` as pid -> (start time, process group)."""
    try:
        children = worker.children(recursive=True)
    except psutil.Error:
        return
    me = os.getpid()
    for child in children:
        if child.pid == me:
            continue
        try:
            seen.setdefault(child.pid, (child.create_time(), os.getpgid(child.pid)))
        except (psutil.Error, OSError):
            continue


def reap(seen: dict[int, tuple[float, int]], grace: float = 5.0) -> None:
    """Stop what `seen` remembers: whole groups led by a remembered process, then the rest."""
    groups = {
        pgid
        for pid, (started, pgid) in seen.items()
        if (pid == pgid and same_process(pid, started)) or pid == -pgid
    }
    for pgid in groups:
        try:
            stop_group(pgid, grace=grace, timeout=30.0)
        except RuntimeError:
            pass
    for pid, (started, _) in seen.items():
        if pid > 0 and same_process(pid, started):
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass


def watch(worker_pid: int, groups: list[int] | None = None) -> None:
    """Until `worker_pid` dies, remember its descendants; then stop them, and `groups` (process
    groups it owns that are not below it, e.g. the local Ray cluster of a driver)."""
    try:
        worker = psutil.Process(worker_pid)
    except psutil.Error:
        return
    started = worker.create_time()
    seen: dict[int, tuple[float, int]] = {}
    for pgid in groups or []:
        try:
            seen[pgid] = (psutil.Process(pgid).create_time(), pgid)
        except psutil.Error:  # the group's leader has exited (ray start does): stop it by group
            seen[-pgid] = (0.0, pgid)
    while pid_alive(worker_pid) and same_process(worker_pid, started):
        _snapshot(worker, seen)
        # Forget processes that ended normally (a server stopped by the worker itself).
        seen = {p: v for p, v in seen.items() if p < 0 or same_process(p, v[0])}
        time.sleep(POLL_S)
    reap(seen)


def start_guard(
    worker_pid: int | None = None, groups: list[int] | None = None
) -> subprocess.Popen[bytes]:
    """Start the guard for `worker_pid` (this process by default) in its own session."""
    root = Path(__file__).resolve().parents[2]  # the lab, wherever Ray started this worker
    argv = [sys.executable, "-m", "tuning.fleet.guard", str(worker_pid or os.getpid())]
    return subprocess.Popen(
        argv + [str(g) for g in groups or []],
        cwd=root,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


if __name__ == "__main__":
    watch(int(sys.argv[1]), [int(g) for g in sys.argv[2:]])
