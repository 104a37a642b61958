"""Is a process (or a process group) still there, is it still the one we started, and stop a group.

The lab stores pids and process groups (runner, server) and acts on them later, maybe from another
process. These are the only checks it uses: a zombie counts as dead (it holds no memory, no port
and answers nothing), a pid of 0 or less is never passed to `kill` (it would mean our own group),
and `same_process` compares start times so that a pid the kernel has given to someone else is
never mistaken for ours.
"""

from __future__ import annotations

import os
import signal
import time

import psutil

# `/proc/stat`'s boot time moves by whole seconds when the clock is stepped, and a start time is
# boot time + ticks since boot; a reused pid starts long after the original, so a few seconds is
# both safe and tolerant.
START_TIME_TOLERANCE_S = 2.0


def pid_alive(pid: int) -> bool:
    """True while `pid` exists and is not a zombie; a process we may not signal still counts."""
    if pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # ZombieProcess is a NoSuchProcess too
        return False
    except psutil.AccessDenied:
        return True


def process_start_time(pid: int) -> float | None:
    """When `pid` started (seconds since the epoch), or None when it is gone or a zombie."""
    if pid <= 0:
        return None
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(proc.create_time())
    except psutil.Error:
        return None


def same_process(pid: int, start_time: float) -> bool:
    """Is `pid` alive and still the process that started at `start_time` (not a reused pid)?"""
    now = process_start_time(pid)
    return now is not None and abs(now - start_time) <= START_TIME_TOLERANCE_S


def holders(path: str | os.PathLike[str]) -> list[str]:
    """Which other processes have `path` open ("pid N: command"), to name who holds a lock."""
    target = os.path.realpath(path)
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid == os.getpid():
            continue
        try:
            if any(os.path.realpath(f.path) == target for f in proc.open_files()):
                found.append(f"pid {proc.pid}: {' '.join(proc.info['cmdline'] or [])[:160]}")
        except psutil.Error:
            continue
    return found


def group_members(pgid: int) -> list[psutil.Process]:
    """The live (non-zombie) processes of process group `pgid`."""
    if pgid <= 0:
        return []
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (psutil.Error, OSError):
            continue
    return members


def group_alive(pgid: int) -> bool:
    """True while any process of group `pgid` lives; a group of zombies only is gone."""
    if pgid <= 0:
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # members we may not signal still count; /proc shows them all the same
    return bool(group_members(pgid))


def continue_group(pgid: int) -> None:
    """SIGCONT a group that may be paused (SIGSTOP, tuning.engine.pause): a stopped process keeps
    a SIGTERM it handles pending until it is continued, so every stop sends this right after its
    SIGTERM (harmless to a group that runs)."""
    if pgid <= 0:
        return
    try:
        os.killpg(pgid, signal.SIGCONT)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(pgid: int, grace: float = 15.0, timeout: float = 60.0) -> None:
    """SIGTERM every process of a group (continued, in case it was paused), SIGKILL what is left
    after `grace`, wait until all are gone; used for servers and runner processes. Raises
    RuntimeError if the group outlives it."""
    if pgid <= 0:
        return
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    except PermissionError:
        return
    continue_group(pgid)
    deadline = time.monotonic() + grace
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_members(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while group_members(pgid):
        if time.monotonic() > deadline:
            raise RuntimeError(f"process group {pgid} survived SIGKILL")
        time.sleep(0.1)
