"""Workload experiments against a server the lab did not start (the fake stands in for a gateway)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from store import open_db, queries
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.experiment.plan import plan_experiment
from tuning.workload import Workload

REPO = Path(__file__).resolve().parents[1]


def test_attached_concurrency_experiment_from_the_cli(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    with FakeOpenAIServer(
        FakeConfig(model="gw-model", itl_ms=1.0, ttft_ms=5.0, api_key="sk-canary-123")
    ) as srv:
        env = {**os.environ, "TUNING_LAB_HOME": str(lab_home), "OPENAI_API_KEY": "sk-canary-123"}
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "tuning",
                "experiment",
                "--base-url",
                srv.base_url + "/v1/",
                "--model",
                "gw-model",
                "--param",
                "concurrency",
                "--values",
                "2,8",
                "--num-requests",
                "24",
                "--input-len",
                "16",
                "--output-len",
                "8",
                "--db",
                str(db_path),
                "--json",
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        peak_seen = srv.stats.max_concurrent
    ids = json.loads(out.stdout.strip().splitlines()[-1])["run_ids"]
    db = open_db(db_path)
    low, high = (queries.get_run(db, i) for i in ids)
    assert (low["value"], high["value"]) == ("2", "8")
    for run in (low, high):
        assert run["status"] == "done" and run["completed"] == 24 and run["failed"] == 0
        # Server-side facts the lab cannot know are unknown, not guessed.
        assert run["kv_cache_tokens"] is None and run["time_to_healthy_s"] is None
        assert run["engine"] == "attached" and run["hardware"] is None
        assert run["workload"]["concurrency"] == int(run["value"])
    assert low["workload_fingerprint"] != high["workload_fingerprint"]
    assert peak_seen == 8
    raw = db_path.read_bytes() + b"".join(
        p.read_bytes() for p in lab_home.rglob("*") if p.is_file()
    )
    assert b"sk-canary-123" not in raw


def test_attached_server_refuses_server_parameters(lab_home: Path) -> None:
    wl = Workload(num_requests=4, concurrency=2, input_len=4, output_len=4)
    with pytest.raises(ValueError, match="needs a server restart"):
        plan_experiment(
            lab_home / "lab.db",
            param="max-num-seqs",
            values=[2, 4],
            workload=wl,
            engine=None,
            base_url="http://127.0.0.1:9/v1",
            model="m",
        )
