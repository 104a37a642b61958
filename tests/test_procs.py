"""Process liveness (zombies are dead, reused pids are not ours) and ServerProcess as a context."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tuning.params import FORCED_HOST, Launch, free_port
from tuning.procs import (
    group_alive,
    group_members,
    pid_alive,
    process_start_time,
    same_process,
    stop_group,
)
from tuning.server import ServerProcess, port_is_free

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


def _wait_for(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_pid_alive_for_ourselves_and_never_for_group_ids() -> None:
    assert pid_alive(os.getpid())
    assert not pid_alive(0)  # kill(0) would mean our own group
    assert not pid_alive(-1)


def test_a_zombie_is_dead_and_has_no_start_time() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert _wait_for(lambda: not pid_alive(child.pid))
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
        assert _wait_for(lambda: len(group_members(server.pgid or 0)) == 2)
    assert not server.alive()
    assert group_members(server.pgid) == []
    assert port_is_free(FORCED_HOST, port)
    server.stop()  # a second stop is a no-op, never a signal to a group id reused since
