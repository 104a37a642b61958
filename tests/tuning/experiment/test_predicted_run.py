"""Issue 13, item 3: each run stores the KV cache tuning.engine.predict expected (before the start)
beside the engine's own figures, and the Runs table shows both with the error in %."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from store import connect, queries
from tests.fakes.engines import fake_settings_env
from ui.predict import prediction_columns


def test_a_run_stores_its_prediction_beside_the_engines_figures(
    tmp_path: Path, tiny_model: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    home = tmp_path / "lab"
    env = {**fake_settings_env(home), "TUNING_LAB_ENGINE_MODEL": str(tiny_model)}
    args = ["experiment", "--repeats", "1", "--param", "kv-cache-memory-bytes", "--values", "1G"]
    args += ["--set", "max-model-len=2048", "--num-requests", "2", "--concurrency", "1"]
    args += ["--input-len", "4", "--output-len", "2", "--num-warmups", "0"]
    args += ["--start-timeout", "240", "--json"]
    done = tuning_cli(args, home, env=env, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    with connect(home / "lab.db", readonly=True) as db:
        (run,) = queries.list_runs(db, include_hidden=True)
    # 1 GiB / (2,048 B a token x 16-token blocks, the GPU default) = 32,768 blocks
    assert run["predicted_kv_cache_tokens"] == 524288
    assert run["predicted_max_concurrency"] == 256.0
    assert run["prediction"]["budget_source"] == "kv-cache-memory-bytes"
    shown = prediction_columns(run)
    assert shown["KV tokens predicted"] == 524288
    engine = run.get("kv_cache_tokens")
    if engine:  # what the fake engine reported, and the error against it
        expected = round((524288 - engine) / engine * 100, 2)
        assert shown["prediction error %"] == expected
    assert prediction_columns({"kv_cache_tokens": 5})["prediction error %"] is None
