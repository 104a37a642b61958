"""The H200 run of 2026-12-05 committed under examples/h200: a flag outside the curated list
(`async-scheduling`, learned from vLLM 0.25.0's parser) run end to end with >= 30 s of load a run,
and each start's anatomy: a configuration's first start compiles, its second hits the cache."""

from __future__ import annotations

import json
from pathlib import Path

from store import open_db, queries, snapshot

H200 = Path(__file__).resolve().parents[2] / "examples" / "h200"


def test_every_flag_of_vllm_0_25_was_read_from_its_own_parser() -> None:
    flags = json.loads((H200 / "flags-h200.json").read_text())
    assert flags["vllm_version"] == "0.25.0" and flags["count"] >= 200
    assert flags["parser"] == "vllm.entrypoints.openai.cli_args.make_arg_parser"
    (flag,) = [f for f in flags["flags"] if f["name"] == "async-scheduling"]
    assert flag["type"] == "bool" and flag["status"] == "tunable" and flag["help"]


def test_async_scheduling_ran_with_the_engines_own_record_of_each_value() -> None:
    db = open_db(snapshot.expanded(H200 / "lab-h200-async-scheduling.db.xz"))
    runs = queries.load_runs(db, queries.experiment_run_ids(db, 1))
    assert [r["value"] for r in runs] == ["false", "true", "true", "false"]  # A B B A
    for run in runs:
        assert run["status"] == "done" and run["failed"] == 0 and run["completed"] == 3072
        assert run["duration"] >= 30 and run["vllm_version"] == "0.25.0"
        said = run["effective_config"]["non_default_args"]["async-scheduling"]
        assert said is (run["value"] == "true") and run["config_mismatch"] == []


def test_each_configurations_first_start_compiled_and_its_second_hit_the_cache() -> None:
    runs = {r["id"]: r for r in json.loads((H200 / "async-scheduling-runs.json").read_text())}
    for first, second in ((1, 4), (2, 3)):  # (false: runs 1, 4), (true: runs 2, 3)
        cold, warm = runs[first]["startup_anatomy"], runs[second]["startup_anatomy"]
        assert cold["compile_cache"]["state"] == "miss" and warm["compile_cache"]["state"] == "hit"
        assert cold["compile_cache"]["dir"] == warm["compile_cache"]["dir"]
        assert cold["reported"]["compile_graphs_s"] > 5 > warm["reported"]["compile_cache_load_s"]
        assert cold["reported"]["compile_s"] > warm["reported"]["compile_s"] + 8
    for run in runs.values():
        anat = run["startup_anatomy"]
        parts = sum(p["seconds"] for p in anat["phases"])
        assert abs(parts - run["time_to_healthy_s"]) <= 0.05 * run["time_to_healthy_s"]
