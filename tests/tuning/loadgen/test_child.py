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
