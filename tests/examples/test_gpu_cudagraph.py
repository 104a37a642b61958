"""The GPU run of 2026-12-05 committed under examples/h200 (on an H100: no H200 was lent that
session): `compilation-config` (a JSON-valued flag learned from vLLM 0.25.0's parser) CUDA graphs
on vs off, repeat until decided, >= 30 s of load a run. vLLM 0.25's `non-default args` line prints
the config's enum members (`<CUDAGraphMode.NONE: 0>`); each run stored the engine's own record of
its value and no mismatch, and the engine's log agrees (graphs captured, or capture skipped)."""

from __future__ import annotations

import json

import pytest

from store import open_db, queries, snapshot
from tests.examples import H200, server_logs
from tuning.cli.main import main as cli_main

ON, OFF = '{"cudagraph_mode":"FULL_AND_PIECEWISE"}', '{"cudagraph_mode":"NONE"}'


def test_each_run_stored_the_engines_record_of_its_cudagraph_mode() -> None:
    db = open_db(snapshot.expanded(H200 / "lab-h100-cudagraph.db.xz"))
    runs = queries.load_runs(db, queries.experiment_run_ids(db, 1))
    assert [r["value"] for r in runs] == [ON, OFF, OFF, ON]  # A B B A
    for run in runs:
        assert run["status"] == "done" and run["failed"] == 0 and run["completed"] == 2048
        assert run["duration"] >= 30 and run["vllm_version"] == "0.25.0"
        assert run["hardware"] == "1x NVIDIA H100 80GB HBM3"
        said = run["effective_config"]["non_default_args"]["compilation-config"]
        mode = "NONE" if run["value"] == OFF else "FULL_AND_PIECEWISE"
        assert said["cudagraph_mode"].split(" ")[0] == mode and run["config_mismatch"] == []
    plan = queries.get_experiment(db, 1)["repeats_plan_json"]
    assert "the time budget is spent" in str(plan)


def test_the_engine_log_agrees_graphs_captured_or_skipped() -> None:
    logs = server_logs("cudagraph-h100-server-logs.tar.gz")
    captured = sum("Graph capturing finished" in text for text in logs)
    skipped = sum("Skipping CUDA graph capture" in text for text in logs)
    assert (captured, skipped) == (2, 2)


def test_compare_names_no_config_object_as_vllms_default(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The parser's default of a JSON-valued flag is a config object (its repr ran to 1,400
    characters in the recommendation): there is no default value to keep."""
    db = str(H200 / "lab-h100-cudagraph.db.xz")
    assert cli_main(["compare", "--db", db, "--experiment", "1"]) == 0
    out = capsys.readouterr().out
    assert "DynamicShapesType" not in out and "p50 TPOT" in out
    # undecided by its rule: no recommendation, what would decide it instead (issue 37)
    assert "Not decided: 6 more runs a side" in out
    assert cli_main(["compare", "--db", db, "--experiment", "1", "--json"]) == 0
    default = json.loads(capsys.readouterr().out)["prefer_default"]["default"]
    assert "vLLM 0.25.0's parser gives compilation-config no fixed default" in default["source"]
