"""The load generator in a child process: the same records, progress and phases come back, and the
key travels to it without appearing in its argv."""

from __future__ import annotations

import time

from tests.factories import load_workload as wl
from tests.factories import prompts_for
from tests.fakes.fake_openai import fake_server
from tuning.measure.loadgen.child import run_load_in_subprocess

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
