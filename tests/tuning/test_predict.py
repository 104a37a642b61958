"""Issue 13, item 3: predict the KV cache before restarting (tuning.engine.predict and `python -m
tuning
predict`): bytes per token from config.json, the budget by the engine's precedence, blocks, tokens,
concurrency at max-model-len; values that cannot start flagged; the H200 runs within 5 %."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries, snapshot
from tests.factories import TINY_MODEL
from tests.fakes.engines import fake_settings_env, fake_spec
from tuning.engine.predict import (
    ModelShape,
    Prediction,
    error_pct,
    predict_config,
    predict_values,
    run_columns,
)

REPO = Path(__file__).resolve().parents[2]
H200_DB = REPO / "examples" / "h200" / "lab-h200.db.xz"
# The 1B dummy Llama of the H200 runs (../shared/tools/gpu-vllm/make_tiny_model.py).
H200_MODEL = json.loads((H200_DB.parent / "model-config.json").read_text())
CPU_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1"}
EAGER = {"enforce-eager": True, "max-model-len": 2048}


def test_bytes_per_token_and_kv_dtype() -> None:
    shape = ModelShape.from_config(TINY_MODEL)
    assert (shape.layers, shape.kv_heads, shape.head_dim) == (2, 4, 64)
    assert shape.kv_bytes_per_token() == 2048
    assert shape.kv_bytes_per_token("fp8") == 1024
    assert ModelShape.from_config(H200_MODEL).kv_bytes_per_token() == 32768


def test_an_explicit_budget_gives_blocks_tokens_and_concurrency() -> None:
    shape = ModelShape.from_config(TINY_MODEL)
    rows = predict_values(
        "kv-cache-memory-bytes", ["2M", "1G"], EAGER, shape, backend="cpu", env=CPU_ENV
    )
    two, one_g = rows
    # the explicit flag wins over the engine's VLLM_CPU_KVCACHE_SPACE (the lab drops the env)
    assert one_g.budget_source == "kv-cache-memory-bytes" and one_g.budget_bytes == 2**30
    assert (one_g.kv_blocks, one_g.kv_tokens, one_g.max_concurrency) == (4096, 524288, 256.0)
    assert one_g.can_start
    # 2 MiB holds 1,024 tokens: less than one 2,048-token request, so the engine refuses
    assert two.kv_tokens == 1024 and not two.can_start
    assert "less than one request" in two.problems[0]
    small = predict_config(
        {**EAGER, "kv-cache-memory-bytes": "2M", "max-model-len": 1024, "block-size": 32},
        shape,
        backend="cpu",
    )
    assert (small.kv_blocks, small.kv_tokens, small.max_concurrency) == (32, 1024, 1.0)
    # ...but the engine keeps one block back (the null block): 31 usable blocks, 992 tokens
    assert not small.can_start and small.max_model_len_limit == 992
    assert "null block" in small.problems[0] and "less than one request" in small.problems[0]


def test_the_start_limit_and_the_logged_tokens_follow_the_engine() -> None:
    """vLLM's check plans against blocks - 1 (the null block); its logged KV tokens are the
    concurrency at max-model-len x max-model-len (get_kv_cache_capacity)."""
    shape = ModelShape.from_config(TINY_MODEL)

    def at(mml: int, **extra: object) -> Prediction:
        config = {**EAGER, "kv-cache-memory-bytes": "2M", "max-model-len": mml, **extra}
        return predict_config(config, shape, backend="cpu")

    assert at(512).kv_tokens == 1024 and at(512).max_concurrency == 2.0  # 8 blocks of 128
    assert at(896).can_start and not at(897).can_start  # 7 of 8 blocks usable
    assert at(896).max_model_len_limit == 896
    assert at(1024).kv_tokens == 1024 and not at(1024).can_start
    assert at(992, **{"block-size": 32}).can_start and not at(993, **{"block-size": 32}).can_start
    # a max-model-len that is not a multiple of the block size: 8 blocks / 4 per request x 500
    assert at(500).kv_tokens == 1000 and at(500).kv_blocks == 8


def test_the_engines_env_budget_and_values_that_cannot_start() -> None:
    shape = ModelShape.from_config(TINY_MODEL)
    env_only = predict_config(EAGER, shape, backend="cpu", env=CPU_ENV)
    assert env_only.kv_tokens == 524288 and "VLLM_CPU_KVCACHE_SPACE" in env_only.budget_source
    rows = predict_values("block-size", [16, 32], EAGER, shape, backend="cpu", env=CPU_ENV)
    assert not rows[0].can_start and "multiple of 32" in rows[0].problems[0]
    assert rows[1].can_start and rows[1].kv_tokens == 524288
    long = predict_config({"max-model-len": 8192}, shape, backend="cpu", env=CPU_ENV)
    assert not long.can_start and "max_position_embeddings" in long.problems[0]
    cap = predict_config({**EAGER, "num-gpu-blocks-override": 10}, shape, backend="gpu")
    assert cap.kv_tokens is None  # a GPU budget needs the device's size
    unknown = predict_config({}, shape, backend="cpu")
    assert unknown.kv_tokens is None and "NUMA" in unknown.budget_source


@pytest.mark.parametrize(
    "example", ["lab-h200.db.xz", "lab-h200-memory-wall.db.xz", "lab-h200-decisions.db.xz"]
)
def test_h200_runs_are_predicted_within_five_percent(example: str) -> None:
    """gpu-memory-utilization 0.5/0.9/default and kv-cache-memory-bytes 1G/4G/16G on the H200
    (the search's runs attached to a running server: no KV figures of their own, left out)."""
    shape = ModelShape.from_config(H200_MODEL)
    with connect(snapshot.expanded(H200_DB.with_name(example)), readonly=True) as db:
        runs = [r for r in queries.list_runs(db) if r["kv_cache_tokens"]]
    assert len(runs) >= 4
    for run in runs:
        device = run["hardware_info"]["gpus"][0]["memory_total_bytes"]
        pred = predict_config(run["config"], shape, backend="gpu", device_bytes=device)
        err = error_pct(pred.kv_tokens, run["kv_cache_tokens"])
        assert err is not None and abs(err) <= 5.0, (run["id"], err)


def test_run_columns_for_the_runs_table(tiny_model: Path) -> None:
    spec = fake_spec()
    assert run_columns(spec, {"max-model-len": 2048}) == {}  # a hub name: no config.json here
    spec.model, spec.backend = str(tiny_model), "cpu"
    cols = run_columns(spec, {**EAGER, "kv-cache-memory-bytes": "1G"})
    assert cols["predicted_kv_cache_tokens"] == 524288
    assert cols["predicted_max_concurrency"] == 256.0
    assert cols["prediction_json"]["budget_source"] == "kv-cache-memory-bytes"
    assert error_pct(524288, 524288) == 0.0 and error_pct(None, 5) is None


def test_cli_predict(tiny_model: Path, tuning_cli: Callable[..., CompletedProcess[str]]) -> None:
    env = {**fake_settings_env(tiny_model.parent / "lab"), "TUNING_LAB_ENGINE_BACKEND": "cpu"}
    env["TUNING_LAB_ENGINE_MODEL"] = str(tiny_model)
    args = ["predict", "--param", "kv-cache-memory-bytes", "--values", "2M,1G"]
    out = tuning_cli([*args, "--set", "max-model-len=2048", "--json"], tiny_model, env=env)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["values"]
    assert [r["kv_tokens"] for r in rows] == [1024, 524288]
    assert [r["can_start"] for r in rows] == [False, True]
    text = tuning_cli(args, tiny_model, env=env)
    assert text.returncode == 0 and "cannot start" in text.stdout and "524,288" in text.stdout
    bad = tuning_cli(["predict", "--param", "block-size", "--values", "x"], tiny_model, env=env)
    assert bad.returncode == 1 and "refused" in bad.stderr
