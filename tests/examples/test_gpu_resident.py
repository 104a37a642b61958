"""Step (m) of the GPU pipeline (benchmarks/gpu/resident_step.py), off the GPU: given the lab's
`experiment` call (here a resident experiment on the fake vLLM as a CUDA engine), it writes
`resident-<gpu>.json` with the experiment's stored resident check, each run's anatomy and how its
server served it, and the time shares; the step is registered in run_on_h200.py's pipeline with
`--resident on` and `--repeats auto`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks.gpu import resident_step
from tests.fakes.engines import fake_spec
from tests.fakes.gpu_box import FAKE_VLLM_PKG, REPO
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload


def test_the_step_writes_its_result_named_by_the_gpu(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE_VLLM_PKG), str(REPO)]))
    monkeypatch.setattr(resident_step, "gpu_name", lambda: "NVIDIA H100 80GB HBM3")
    db = lab_home / "lab.db"

    def experiment(key: str) -> dict[str, Any]:  # what run_on_h200.experiment does, on the fake
        assert key == resident_step.KEY
        spec = ExperimentSpec.build(
            param=resident_step.PARAM,
            values=[2, 16],
            repeats=2,
            workload=Workload(num_requests=8, concurrency=2, input_len=8, output_len=8),
            engine=fake_spec("ttft_ms=20,itl_ms=2"),
            base_config={"kv-cache-memory-bytes": 64 * 2**20},
            resident="on",
        )
        exp_id = plan_experiment(db, spec)
        run_experiment(db, exp_id, start_timeout=60)
        return {"experiment_id": exp_id, "rc": 0, "wall_s": 1.0}

    said = resident_step.resident_step(experiment, db, lab_home)
    assert said["file"] == "resident-nvidia-h100-80gb-hbm3.json"
    result = json.loads((lab_home / said["file"]).read_text())
    assert result["gpu"] == "NVIDIA H100 80GB HBM3"
    resident = result["experiment"]["resident"]
    assert resident["used"] is True and resident["check"]["values"]["2"]["switched_runs"] == 1
    assert [r["served_by"] for r in result["runs"]] == ["start", "start", "switch", "switch"]
    assert "switch" in result["parts_s"] and 0 < result["restart_share"] < 1
    assert abs(sum(result["share"].values()) - 1.0) < 0.02  # the parts cover the runs' wall time
    # both starts are the values' first: nothing restarted after them
    starts = [p["seconds"] for r in result["runs"] for p in r["anatomy"]["parts"]]
    assert result["first_starts_s"] > 0 and sum(starts) >= result["first_starts_s"]
    assert 0 <= result["restart_share_after_first_starts"] < result["restart_share"]
    # no nvidia-smi here: nobody seen holding device memory
    assert result["gpu_memory_holders"]["processes"] == []


def test_who_held_device_memory_is_named_by_the_runs() -> None:
    runs = [
        {"seq": 0, "server_pid": 100, "startup": {"engine_pids": {"EngineCore": 101}}},
        {"seq": 1, "server_pid": 200, "startup": {"engine_pids": {"EngineCore_0": 201}}},
    ]
    apps = resident_step.ComputeApps()
    apps.seen, apps.most_at_once = {101: 9000, 201: 9100, 200: 500, 7: 10}, 2
    held = resident_step.gpu_holders(apps, runs, {"engine_pids": {"EngineCore": 7}})
    names = {p["pid"]: p["is"] for p in held["processes"]}
    assert names == {
        7: "EngineCore of the KV probe",
        101: "EngineCore of run 0",
        200: "API server of run 1",
        201: "EngineCore of run 1",
    }
    assert [p["pid"] for p in held["api_servers_holding_memory"]] == [200]


def test_the_step_is_in_the_pipeline_resident_and_until_decided() -> None:
    flags = resident_step.FLAGS
    assert flags[flags.index("--resident") + 1] == "on"
    assert flags[flags.index("--repeats") + 1] == "auto"
    text = (REPO / "benchmarks" / "gpu" / "run_on_h200.py").read_text()
    assert '"m": resident_run' in text and "resident-*.json" in text
