"""A watchdog beside each fleet worker: when the worker dies (killed, its node's Ray stopped, its
driver gone) the servers it started die too.

Ray's own cancel and kill stop the worker process only; a vLLM server started in its own session
(as the lab starts every server) would live on, holding its GPU and port. The guard runs in a
session of its own, remembers every process below the worker (and their process groups) while
the worker lives, and once the worker is gone stops those groups by group with escalation, then
any remembered process left, each checked by start time so a reused pid is never signalled.

    python -m tuning.decide.fleet.guard WORKER_PID [PGID ...] [--report FILE] [--detach]

A fleet worker's guard is detached (`start_detached_guard`: not the worker's child). Ray kills an
actor whose driver died by killing the worker's direct children, then the worker
(`kill_child_processes_on_worker_exit`): a guard among those children died with them, and a
server the worker started in between (the next run, dispatched just before the driver died) lived
on with no one to stop it.

With PGIDs it also stops those groups when the worker dies: a driver's local Ray cluster (its
`ray start` processes are not below the driver) goes when the driver is killed. With a report
file it writes there what it remembers each time that changes, so a test can wait until the
guard has seen a tree instead of guessing how long that takes; without one, a guard whose
environment names a folder in TUNING_LAB_GUARD_REPORTS writes `guard-WORKER_PID.txt` there (how
a test reaches the guards of Ray's workers, which inherit the environment of `ray start`).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil

from tuning.decide.fleet import swallowed
from tuning.engine import ipc_dir
from tuning.engine.procs import pid_alive, same_process, stop_group

POLL_S = 0.2
REPORTS_ENV = "TUNING_LAB_GUARD_REPORTS"  # a folder for every guard's report (tests)
# Set by a fleet worker in its own environment, so every server it starts inherits it: the guard
# finds a server its last poll missed (started just before the worker was killed) by this mark.
OWNER_ENV = "TUNING_LAB_GUARD_OWNER"
LAB_ROOT = Path(__file__).resolve().parents[3]  # the lab, wherever Ray started the worker


def owner_mark(pid: int, started: float) -> str:
    """The mark of one process (pid and start time: a reused pid is another owner)."""
    return f"{pid}:{started:.3f}"


def marked(mark: str, seen: dict[int, tuple[float, int]]) -> None:
    """Add to `seen` every live process whose environment carries `mark`."""
    me = os.getpid()  # the guard inherits its worker's mark too
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != me and proc.environ().get(OWNER_ENV) == mark:
                seen.setdefault(proc.pid, (proc.create_time(), os.getpgid(proc.pid)))
        except (psutil.Error, OSError):
            continue


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


def reap_orphans(seen: dict[int, tuple[float, int]], grace: float = 5.0) -> None:
    """Stop what `seen` remembers: whole groups led by a remembered process, then the rest."""
    groups = {
        pgid
        for pid, (started, pgid) in seen.items()
        if (pid == pgid and same_process(pid, started)) or pid == -pgid
    }
    folders = {ipc_dir.folder_of(pid) for pid, (t, _) in seen.items() if same_process(pid, t)}
    for pgid in groups:
        try:
            stop_group(pgid, grace=grace, timeout=30.0)
        except RuntimeError as exc:  # a survivor: its pid is killed below if it is ours
            swallowed(f"stopping process group {pgid}", exc)
    for pid, (started, _) in seen.items():
        if pid > 0 and same_process(pid, started):
            try:
                psutil.Process(pid).kill()
            except psutil.NoSuchProcess:
                continue  # it ended between the check and the kill: nothing left to stop
            except psutil.Error as exc:
                swallowed(f"killing pid {pid}", exc)
    for folder in folders:  # the stopped servers' sockets
        ipc_dir.remove(folder)


def _report(path: Path, seen: dict[int, tuple[float, int]]) -> None:
    """Write `seen` to `path` whole (one `PID PGID` a line; a negative pid is a group whose
    leader has exited), replacing the previous report atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(f"{pid} {pgid}\n" for pid, (_, pgid) in sorted(seen.items())))
    os.replace(tmp, path)


def read_report(path: Path) -> dict[int, int]:
    """A guard's report as pid -> pgid (empty until the guard has written one)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    return {int(pid): int(pgid) for pid, pgid in map(str.split, text.splitlines())}


def watch(worker_pid: int, groups: list[int] | None = None, report: Path | None = None) -> None:
    """Until `worker_pid` dies, remember its descendants; then stop them, and `groups` (process
    groups it owns that are not below it, e.g. the local Ray cluster of a driver). `report`:
    a file that always holds what the guard remembers."""
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
    reported: set[int] | None = None
    while pid_alive(worker_pid) and same_process(worker_pid, started):
        _snapshot(worker, seen)
        # Forget processes that ended normally (a server stopped by the worker itself).
        seen = {p: v for p, v in seen.items() if p < 0 or same_process(p, v[0])}
        if report is not None and set(seen) != reported:
            _report(report, seen)
            reported = set(seen)
        time.sleep(POLL_S)
    marked(owner_mark(worker_pid, started), seen)
    reap_orphans(seen)


def _guard_argv(
    worker_pid: int | None, groups: list[int] | None = None, report: Path | None = None
) -> list[str]:
    """The guard's command line for `worker_pid` (this process by default)."""
    argv = [sys.executable, "-m", "tuning.decide.fleet.guard", str(worker_pid or os.getpid())]
    argv += [str(g) for g in groups or []]
    if report is not None:
        argv += ["--report", str(report)]
    return argv


def start_guard(
    worker_pid: int | None = None, groups: list[int] | None = None, report: Path | None = None
) -> subprocess.Popen[bytes]:
    """Start the guard for `worker_pid` (this process by default) in its own session."""
    return subprocess.Popen(
        _guard_argv(worker_pid, groups, report),
        cwd=LAB_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=None,  # its lines (what it could not stop) go to the starter's stderr, its log
        start_new_session=True,
    )


def start_detached_guard(worker_pid: int | None = None) -> psutil.Process:
    """Start the guard for `worker_pid` (this process by default) outside its tree: the guard
    forks, prints its child's pid and exits; that child, reparented to init, watches."""
    out = subprocess.run(
        [*_guard_argv(worker_pid), "--detach"],
        cwd=LAB_ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,  # the pid; the watching child lets go of it (_detach)
        stderr=None,  # its lines go to the worker's stderr (Ray keeps it in the worker's log)
        start_new_session=True,
        check=True,
        timeout=60,
    )
    return psutil.Process(int(out.stdout.split()[0]))


def stop_guard(guard: psutil.Process) -> None:
    """End a detached guard whose worker ends normally (its servers are already stopped)."""
    try:
        guard.terminate()
        guard.wait(timeout=5)
    except psutil.TimeoutExpired:
        guard.kill()
    except psutil.NoSuchProcess:
        return  # it ended with its worker already: nothing to stop


def _detach() -> None:
    """Fork: the parent prints the child's pid and exits, the child goes on to watch."""
    child = os.fork()
    if child:
        print(child, flush=True)
        os._exit(0)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the starter reads stdout to its end: let it go
    os.close(devnull)


if __name__ == "__main__":
    cli = argparse.ArgumentParser(prog="python -m tuning.decide.fleet.guard")
    cli.add_argument("worker_pid", type=int)
    cli.add_argument("groups", type=int, nargs="*")
    cli.add_argument("--report", type=Path)
    cli.add_argument("--detach", action="store_true", help="fork away from the caller's tree")
    args = cli.parse_args()
    if args.detach:
        _detach()
    reports = os.environ.get(REPORTS_ENV)
    if args.report is None and reports:
        args.report = Path(reports) / f"guard-{args.worker_pid}.txt"
    watch(args.worker_pid, args.groups, args.report)
