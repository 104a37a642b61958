"""Issue 11 item 2 (the token race) and item 11 (the server's own latency means) through the
runner, against a fake whose /metrics counts tokens and latencies late, as vLLM's stat logger does.

Before the fix the runner read /metrics when the load child said "loading" (while the first
measured requests were already on their way, and before the warm-ups' last tokens were counted)
and right after the load returned (before the last request's tokens were counted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import open_db, queries
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload


@pytest.mark.parametrize("lag_ms", [0.0, 400.0])
def test_late_counters_still_reconcile_and_server_means_are_stored(
    lab_home: Path, lag_ms: float
) -> None:
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=16, concurrency=4, input_len=8, output_len=16, num_warmups=4)
    config = FakeConfig(model="m", ttft_ms=40.0, itl_ms=3.0, counter_lag_ms=lag_ms)
    with FakeOpenAIServer(config) as srv:
        exp_id = plan_experiment(
            db_path,
            ExperimentSpec.build(
                param="concurrency",
                values=[4],
                workload=wl,
                engine=None,
                base_url=srv.base_url,
                model="m",
            ),
        )
        run_experiment(db_path, exp_id)
    (run,) = queries.list_runs(open_db(db_path), exp_id)
    assert run["status"] == "done" and run["completed"] == 16
    tokens = run["health"]["tokens"]
    assert tokens["server_output_tokens"] == 16 * 16 and tokens["agree"], tokens
    assert tokens["reads"]["before"]["settled"] and tokens["reads"]["after"]["settled"]
    summary = run["summary"]
    # The fake's own clock: 40 ms to the first token, 15 gaps of 3 ms after it (floors: how far
    # above them a busy machine lands is no property of the lab).
    assert summary["server_mean_ttft_ms"] >= 40
    assert summary["server_mean_e2el_ms"] >= summary["server_mean_ttft_ms"] + 40
    assert summary["server_mean_queue_ms"] is not None
    assert summary["server_mean_itl_ms"] >= 3 and summary["server_mean_tpot_ms"] >= 3
    gap = summary["client_minus_server_ttft_ms"]  # the client's wait holds the server's
    assert gap >= 0 and gap == pytest.approx(
        summary["mean_ttft_ms"] - summary["server_mean_ttft_ms"]
    )
    latency = run["health"]["server_latency"]  # its bound: test_health_server, on set numbers
    assert latency["comparable"] and latency["flagged"] == bool(latency["reasons"]), latency
    assert latency["server_ttft_count"] == latency["server_e2el_count"] == 16
