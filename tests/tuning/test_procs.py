"""Process liveness: zombies are dead, reused pids are not ours, a group is stopped whole."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.checks import wait_for
from tuning.engine.procs import (
    group_alive,
    group_members,
    pid_alive,
    process_start_time,
    same_process,
    stop_group,
)


def test_pid_alive_for_ourselves_and_never_for_group_ids() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0)  # kill(0) would mean our own group
    assert not pid_alive(-1)


def test_a_zombie_is_dead_and_has_no_start_time() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert wait_for(lambda: not pid_alive(child.pid))
        assert process_start_time(child.pid) is None
    finally:
        child.wait()
    assert not pid_alive(child.pid)


def test_same_process_compares_start_times() -> None:
    started = process_start_time(os.getpid())
    assert started is not None and abs(started - time.time()) < 24 * 3600 * 365
    assert same_process(os.getpid(), started)
    assert not same_process(os.getpid(), started - 3600)  # a pid reused by someone else
    assert not same_process(0, started)


def test_group_alive_and_stop_group() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
    )
    try:
        assert group_alive(proc.pid)
        assert [p.pid for p in group_members(proc.pid)] == [proc.pid]
        stop_group(proc.pid, grace=5, timeout=10)
        assert not group_alive(proc.pid)  # the leader may be an unreaped zombie: still gone
        assert group_members(proc.pid) == []
    finally:
        proc.kill()
        proc.wait()
    assert not group_alive(0)
