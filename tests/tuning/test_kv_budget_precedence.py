"""Issue 11 item 1, the precedence: an explicit KV flag drops the baseline's VLLM_CPU_KVCACHE_SPACE
(vLLM's CPU platform copies that variable over --kv-cache-memory-bytes, so the flag was ignored),
and a configuration with two KV budgets, one of which the engine would ignore, is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.engines import fake_launch
from tuning.engine.embedded import EMBEDDED_BASELINE, EMBEDDED_ENV, embedded_spec
from tuning.engine.launch import build_launch
from tuning.engine.params import ParamError
from tuning.engine.server import ServerProcess
from tuning.engine.validate import validate_config
from tuning.experiment.plan import plan_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

CPU_KV_ENV = "VLLM_CPU_KVCACHE_SPACE"


def embedded_launch(config: dict[str, Any]) -> Any:
    spec = embedded_spec()
    return build_launch(
        spec.command,
        spec.model,
        spec.served_model_name,
        {**spec.baseline, **config},
        spec.backend,
        port=18999,
        load_format=spec.load_format,
        base_env=spec.env,
    )


def test_the_embedded_baseline_keeps_its_kv_budget() -> None:
    assert EMBEDDED_ENV[CPU_KV_ENV] == "1"
    launch = embedded_launch({"max-num-seqs": 4})
    assert launch.env[CPU_KV_ENV] == "1" and getattr(launch, "unset_env", ()) == ()


@pytest.mark.parametrize(
    ("config", "flag"),
    [
        ({"kv-cache-memory-bytes": "2M"}, ["--kv-cache-memory-bytes", "2097152"]),
        ({"kv-cache-memory-bytes": "1G"}, ["--kv-cache-memory-bytes", "1073741824"]),
        ({"gpu-memory-utilization": 0.3}, ["--gpu-memory-utilization", "0.3"]),
    ],
    ids=["2M", "1G", "gpu-memory-utilization"],
)
def test_an_explicit_kv_flag_drops_the_baselines_env_budget(
    config: dict[str, Any], flag: list[str]
) -> None:
    launch = embedded_launch(config)
    i = launch.argv.index(flag[0])
    assert launch.argv[i : i + 2] == flag
    assert CPU_KV_ENV not in launch.env  # it would override the flag on the CPU backend
    # and not inherited from the lab's own environment either
    assert getattr(launch, "unset_env", None) == (CPU_KV_ENV,)
    assert launch.env["HF_HUB_OFFLINE"] == "1"  # the rest of the baseline env stays


def test_the_server_does_not_inherit_a_dropped_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fake records the VLLM_ environment it was started with."""
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    monkeypatch.setenv(CPU_KV_ENV, "3")  # the user's shell has one
    monkeypatch.delenv("FAKE_VLLM_FAULTS", raising=False)
    for config in ({"kv-cache-memory-bytes": "1G"}, {"max-num-seqs": 2}):
        with ServerProcess(fake_launch(config), tmp_path / "server.log") as server:
            server.wait_healthy(timeout=30)
    first, second = (json.loads(line)["env"] for line in record.read_text().splitlines())
    assert CPU_KV_ENV not in first
    assert second[CPU_KV_ENV] == "3"  # no KV flag: nothing is taken away


@pytest.mark.parametrize(
    "config",
    [
        {CPU_KV_ENV: 2, "kv-cache-memory-bytes": "1G"},
        {CPU_KV_ENV: 2, "gpu-memory-utilization": 0.5},
        {"kv-cache-memory-bytes": "1G", "gpu-memory-utilization": 0.5},
    ],
    ids=["env+bytes", "env+utilization", "bytes+utilization"],
)
def test_two_kv_budgets_are_refused(config: dict[str, Any]) -> None:
    with pytest.raises(ParamError, match="both set the KV-cache budget"):
        validate_config(config, "cpu")


def test_an_experiment_whose_values_would_be_ignored_is_refused(lab_home: Path) -> None:
    workload = Workload(num_requests=4, concurrency=2, input_len=8, output_len=4)
    with pytest.raises(ParamError, match="environment variable wins"):
        plan_experiment(
            lab_home / "lab.db",
            ExperimentSpec.build(
                param="kv-cache-memory-bytes",
                values=["8M", "1G"],
                workload=workload,
                engine=embedded_spec(),
                base_config={CPU_KV_ENV: 2},
                author="t",
                host="h",
            ),
        )
    assert EMBEDDED_BASELINE.get("kv-cache-memory-bytes") is None
