"""One run through the fleet on the real embedded engine against the same run without it (the
session's `real_lab`, value 16): the same workload, configuration and answers, placement stored,
and metrics within the spread runs of one configuration show on this shared 2-core machine."""

from __future__ import annotations

import json
from collections.abc import Callable
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect, queries
from tests.engine import starved

pytestmark = [pytest.mark.usefixtures("ray_installed"), pytest.mark.engine, pytest.mark.fleet]
# One configuration's runs vary by up to this factor here (load average 5-15); a fresh-clone
# `make test` beside a busy loop measured 2,926 tok/s local vs 1,452 on the fleet (Ray's own
# processes share the 2 cores): 2.0 was too tight. The exact checks are the token totals and KV
# tokens the test asserts before this spread.
SPREAD = 3.0


def test_a_fleet_run_measures_what_a_local_run_measures(
    real_lab: dict[str, Any], tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    home, db_path = real_lab["home"], real_lab["db"]
    argv = [
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
        "--values",
        "16",
        "--concurrency",
        "16",
    ]
    argv += ["--num-requests", "64", "--input-len", "64", "--output-len", "64"]
    argv += ["--start-timeout", "600", "--db", str(db_path), "--json"]
    out = tuning_cli([*argv, "--fleet", "local", "--slots", "1"], home)
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    fleet_id = json.loads(out.stdout.strip().splitlines()[-1])["run_ids"][0]
    with connect(db_path) as db:
        local = queries.get_run(db, real_lab["run_ids"][1])
        fleet = queries.get_run(db, fleet_id)
    assert local["value"] == fleet["value"] == "16"
    assert fleet["status"] == "done", (fleet["failure_kind"], fleet["failure_reason"])
    assert fleet["workload_fingerprint"] == local["workload_fingerprint"]
    assert fleet["config"] == local["config"]
    assert (fleet["completed"], fleet["failed"]) == (local["completed"], local["failed"]) == (64, 0)
    assert fleet["total_output_tokens"] == local["total_output_tokens"]
    assert fleet["kv_cache_tokens"] == local["kv_cache_tokens"]  # the same engine, same memory
    assert fleet["node_id"] and fleet["slot"] and fleet["placement"]["vllm_port"]
    assert fleet["log_path"].endswith(f"run-{fleet['uid']}.log")
    # Latencies measure the server only when the load generator kept up: under a CPU-heavy job the
    # fleet's client (beside Ray's daemons on 2 cores) once held 9.4 of 16 requests in flight, so
    # TTFT was 4.5x and TPOT 0.2x the local run's, and the lab flagged the run client-bound. Those
    # are compared when neither run is flagged; throughput unless a client stalled (`starved`).
    bound = {
        name: run["health"]["client_bound_reasons"]
        for name, run in [("local", local), ("fleet", fleet)]
    }
    print(f"client-bound: {bound}")
    metrics = [] if starved(local) or starved(fleet) else ["output_throughput"]
    if not any(bound.values()) and metrics:
        metrics += ["mean_ttft_ms", "mean_tpot_ms"]
    for metric in metrics:
        ratio = fleet[metric] / local[metric]
        print(f"{metric}: local {local[metric]:.1f}, fleet {fleet[metric]:.1f}, ratio {ratio:.2f}")
        assert 1 / SPREAD <= ratio <= SPREAD, (metric, local[metric], fleet[metric])
