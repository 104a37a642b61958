"""The fleet runs the experiment the local runner runs (issue 22): the same ShareGPT experiment,
once on this machine and once through `--fleet local --slots 1`, stores the same workload
fingerprint and token totals. Before the one run path, the worker re-created the experiment from
a list of columns that left out the traffic spec: the fleet's runs replayed the fixed 64/64
default (2,560 / 2,560 tokens instead of 6,166 / 12,429) and said `done`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from store import connect, queries
from tests.fakes.engines import fake_settings_env
from tuning.settings import REPO_ROOT

pytestmark = [pytest.mark.usefixtures("ray_installed"), pytest.mark.fleet, pytest.mark.timeout(600)]
DATASET = REPO_ROOT / "workloads" / "chat-500.sharegpt.json"


def _experiment(home: Path, db: Path, *extra: str) -> list[dict[str, object]]:
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
    argv += ["--values", "4,8", "--dataset", str(DATASET), "--dataset-format", "sharegpt"]
    argv += ["--num-requests", "40", "--concurrency", "4", "--db", str(db), "--json", *extra]
    env = {**os.environ, **fake_settings_env(home), "TUNING_LAB_DB": str(db)}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=500)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    run_ids = json.loads(out.stdout.strip().splitlines()[-1])["run_ids"]
    with connect(db) as conn:
        return [queries.get_run(conn, int(i)) for i in run_ids]


def test_a_fleet_run_replays_the_experiments_own_dataset(tmp_path: Path) -> None:
    # two lab homes: the shared-home log defect has its own test (tests/tuning/experiment/
    # test_run_evidence.py); here only what the fleet replays may differ
    local = _experiment(tmp_path / "a", tmp_path / "local.db")
    fleet = _experiment(tmp_path / "b", tmp_path / "fleet.db", "--fleet", "local", "--slots", "1")

    def key(runs: list[dict[str, object]]) -> list[tuple[object, ...]]:
        return sorted(
            (
                r["value"],
                r["status"],
                r["workload_fingerprint"],
                r["total_input_tokens"],
                r["total_output_tokens"],
                r["completed"],
            )
            for r in runs
        )

    assert [r["status"] for r in local] == ["done", "done"]
    assert key(fleet) == key(local)
    assert all(r["node_id"] and r["slot"] for r in fleet)  # the fleet really ran them
    # the dataset's own lengths, not the fixed 64/64 default (40 x 64 = 2,560 each way)
    assert all(r["total_input_tokens"] != 40 * 64 for r in fleet)
    assert all(r["workload_spec"] for r in fleet)
