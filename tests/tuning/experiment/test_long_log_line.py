"""One long log line no longer holds the runner past `--start-timeout` (issue 41, case 8): the
server answered /health 200, then an unanchored `.*(...).*` regex spent 2.4/40/155 s on one line of
25/100/200 KB while the runner's heartbeat kept the reaper away; a 50 MB line never ended. The fake
vLLM prints one 50 MB line before it serves (`long_line`); the runner, in its own process as the
CLI starts it, must store the run well inside the start timeout (it parses in linear time and the
timeout covers the parse)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from store import connect, queries
from tests.fakes.engines import fake_settings_env

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 30
BOUND_S = 150  # a generous bound for a hang: the start, 4 requests and the stop take ~10 s here
REAL_TOKENS = 3_643_792


def test_a_50_mb_log_line_is_read_inside_the_start_timeout(no_leftovers: Path) -> None:
    home = no_leftovers
    env = {**os.environ, **fake_settings_env(home, "long_line=50000000"), "PYTHONUNBUFFERED": "1"}
    argv = [
        sys.executable,
        "-m",
        "tuning",
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
    ]
    argv += ["--values", "4", "--num-requests", "4", "--concurrency", "2", "--input-len", "8"]
    argv += ["--output-len", "4", "--num-warmups", "0", "--json"]
    argv += ["--start-timeout", str(START_TIMEOUT_S)]
    runner = subprocess.Popen(
        argv,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    t0 = time.monotonic()
    try:
        out, err = runner.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        os.killpg(runner.pid, signal.SIGKILL)  # the runner's own session; its server is swept
        runner.communicate()  # by no_leftovers
        pytest.fail(f"the runner was still busy {BOUND_S} s after it started")
    assert runner.returncode == 0, out + err
    with connect(home / "lab.db", readonly=True) as db:
        (run,) = queries.list_runs(db, None, include_hidden=True)
    assert run["status"] == "done", (run["failure_kind"], run["failure_reason"])
    assert run["kv_cache_tokens"] == REAL_TOKENS
    log = Path(str(run["log_path"]))
    assert log.stat().st_size > 50_000_000  # the line was there
    assert time.monotonic() - t0 < BOUND_S
