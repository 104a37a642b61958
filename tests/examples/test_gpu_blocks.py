"""The GPU run of 2026-12-05 (second session) committed under examples/h200, on an H100 (the
device tool lent an H100 for `nvidia-h200`): `num-gpu-blocks-override` (a flag outside the curated
list, learned from vLLM 0.25.0's parser) 2048 vs 32768 blocks, repeat until decided, >= 30 s of
load a run. The budget stopped it after two rounds; `experiment --resume 1 --budget-minutes 22`
ran the third, where output throughput was decided too. Each run stored the engine's own record
of its value and the KV capacity it reported."""

from __future__ import annotations

import json

import pytest

from store import open_db, queries, snapshot
from tests.examples import H200, server_logs
from tuning.cli.main import main as cli_main

DB = H200 / "lab-h100-gpu-blocks.db.xz"


def test_each_run_stored_the_engines_record_of_its_block_count() -> None:
    db = open_db(snapshot.expanded(DB))
    runs = queries.load_runs(db, queries.experiment_run_ids(db, 1))
    assert [r["value"] for r in runs] == ["2048", "32768", "32768", "2048", "2048", "32768"]
    for run in runs:
        assert run["status"] == "done" and run["failed"] == 0 and run["completed"] == 2048
        assert run["duration"] >= 30 and run["vllm_version"] == "0.25.0"
        assert run["hardware"] == "1x NVIDIA H100 80GB HBM3"
        said = run["effective_config"]["non_default_args"]["num-gpu-blocks-override"]
        assert str(said) == run["value"] and run["config_mismatch"] == []


def test_repeat_until_decided_decided_throughput_and_ttft_on_the_resumed_round() -> None:
    stored = queries.get_experiment(open_db(snapshot.expanded(DB)), 1)["repeats_plan_json"]
    plan = json.loads(stored)
    state = plan["values"]["32768"]
    assert state["decided_at"] == {"mean_ttft_ms": 2, "output_throughput": 3}
    assert state["verdicts"]["output_throughput"] == "better"
    assert state["verdicts"]["mean_ttft_ms"] == "better"
    assert plan["reason"] == "stopped: max_repeats reached"


def test_compare_shows_the_kv_capacity_and_preemptions_behind_the_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli_main(["compare", "--db", str(DB), "--experiment", "1"]) == 0
    out = capsys.readouterr().out
    assert "output throughput +193.1 % (better)" in out
    assert "32,768        524,288" in out  # KV capacity, tokens: 2048 vs 32768 blocks of 16
    line = next(x for x in out.splitlines() if x.strip().startswith("preemptions"))
    assert line.split()[1:4] == ["info", "735", "0"]  # for information: not a primary


def test_the_engine_log_agrees_it_overrode_the_block_count() -> None:
    logs = server_logs("gpu-blocks-h100-server-logs.tar.gz")
    said = [
        line.rsplit("num_gpu_blocks_override=", 1)[1].strip()
        for text in logs
        for line in text.splitlines()
        if "Overriding num_gpu_blocks=" in line
    ]
    assert sorted(said) == ["2048"] * 3 + ["32768"] * 3
