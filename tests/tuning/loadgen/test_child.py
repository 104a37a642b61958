"""The load generator in a child process: the same records, progress and phases come back, and the
key travels to it without appearing in its argv."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from tests.factories import load_workload as wl
from tests.factories import prompts_for
from tests.fakes.fake_openai import fake_server
from tuning.measure.loadgen import child
from tuning.measure.loadgen.child import run_load_in_subprocess
from tuning.measure.loadgen.client import LoadError

MODEL = "fake-model"
KEY = "sk-test-0123456789abcdef"


def test_in_a_subprocess() -> None:
    transport = "raw"
    w = wl(n=10, c=3, warm=2)
    seen: list[tuple[int, int]] = []
    phases: list[str] = []
    with fake_server(ttft_ms=5) as srv:
        began = time.monotonic()
        res = run_load_in_subprocess(
            srv.base_url,
            MODEL,
            prompts_for(w),
            w,
            api_key=KEY,
            on_progress=lambda d, t: seen.append((d, t)),
            on_phase=phases.append,
            transport=transport,
        )
        assert set(srv.stats.authorization) == {f"Bearer {KEY}"}
        ended = time.monotonic()
    assert len(res.records) == 10 and all(r.ok for r in res.records)
    assert seen[-1] == (10, 10) and phases == ["warming_up", "loading"]
    # The load's start on the parent's clock, however late the "loading" message arrives.
    assert res.started_monotonic is not None
    assert began < res.started_monotonic < ended - res.duration_s


def test_a_child_that_fails_is_quoted_from_the_end_of_its_stderr(tmp_path: Path) -> None:
    """Issue 39, item 6: its whole stderr was read into memory to keep the last 2,000 bytes (40 MB
    here); now only the end is read."""
    import tracemalloc

    fake = tmp_path / "python"  # an interpreter that says a great deal, then fails
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        "for _ in range(40):\n    sys.stderr.write('x' * 1_000_000 + '\\n')\n"
        "sys.stderr.write('the last words\\n')\nsys.exit(3)\n"
    )
    fake.chmod(0o755)
    w = wl(n=2, c=1)
    tracemalloc.start()
    try:
        with pytest.raises(LoadError) as failed:
            run_load_in_subprocess("http://127.0.0.1:9", MODEL, prompts_for(w), w, python=str(fake))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(failed.value)
    assert message.startswith("the load generator process exited with 3: ")
    assert message.endswith("the last words\n") and len(message) < 2100
    assert peak < 8 * 2**20, peak  # the tail, not the 40 MB


def test_a_child_started_ahead_runs_the_next_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38, item 2: a run's load generator started while the last run stored (a second of
    Python start and imports a run on an H100, out of the run's time)."""
    spawned: list[int] = []
    real = child._Child.spawn

    def spawn(python: str) -> child._Child:
        made = real(python)
        spawned.append(made.proc.pid)
        return made

    monkeypatch.setattr(child._Child, "spawn", spawn)
    w = wl(n=6, c=2, warm=1)
    child.prespawn()
    child.prespawn()  # one is enough: a second call keeps it
    (ready,) = spawned
    with fake_server(ttft_ms=5) as srv:
        res = run_load_in_subprocess(srv.base_url, MODEL, prompts_for(w), w, transport="raw")
    assert len(res.records) == 6 and all(r.ok for r in res.records)
    assert spawned == [ready] and child._spare == {}  # it ran the load; nothing new was started


def test_a_child_started_ahead_and_never_given_a_job_exits_quietly() -> None:
    child.prespawn()
    proc = child._spare[sys.executable].proc
    child.discard_spare()
    assert proc.returncode == 0 and child._spare == {}


def test_a_child_that_died_waiting_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    child.prespawn()
    dead = child._spare[sys.executable].proc
    dead.kill()
    dead.wait()
    w = wl(n=4, c=2)
    with fake_server(ttft_ms=5) as srv:
        res = run_load_in_subprocess(srv.base_url, MODEL, prompts_for(w), w, transport="raw")
    assert len(res.records) == 4 and all(r.ok for r in res.records) and child._spare == {}
