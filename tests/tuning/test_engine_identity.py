"""A run's engine identity (tuning.engine.identity): the model's config is hashed from the folder
or the Hugging Face cache (bounded; too large or unreadable is unknown), the inherited knobs are
the ones that shape a run, and no secret reaches the stored identity."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from tuning.engine.identity import MAX_CONFIG_BYTES, engine_identity, identity_problem
from tuning.engine.spec import EngineSpec

SECRET = "sk-canaryIdentity0123456789"


def _spec(model: str, **over: object) -> EngineSpec:
    fields: dict[str, object] = {
        "name": "custom",
        "command": ["/opt/vllm/bin/python", "-m", "vllm.entrypoints.openai.api_server"],
        "model": model,
        "served_model_name": "m",
        "backend": "gpu",
        **over,
    }
    return EngineSpec(**fields)  # type: ignore[arg-type]


def test_a_hub_model_is_hashed_from_the_cache_when_it_is_there(tmp_path: Path) -> None:
    snapshot = tmp_path / "hub" / "models--meta-llama--Llama-3.1-8B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    data = json.dumps({"model_type": "llama"}).encode()
    (snapshot / "config.json").write_bytes(data)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "XDG_CACHE_HOME": str(tmp_path / "none")}
    cached = engine_identity(_spec("meta-llama/Llama-3.1-8B"), env)
    assert cached["model_source"] == "hub"
    assert cached["model_config_sha256"] == hashlib.sha256(data).hexdigest()
    other = engine_identity(_spec("evil-org/Llama-3.1-8B"), env)
    assert (
        other["model_config_sha256"] is None and identity_problem(other) is None
    )  # the id names it
    assert other != cached


def test_a_local_config_too_large_or_missing_is_unknown(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_bytes(b" " * (MAX_CONFIG_BYTES + 1))
    big = engine_identity(_spec(str(folder)), {})
    assert big["model_config_sha256"] is None
    assert "could not be read" in str(identity_problem(big))
    missing = engine_identity(_spec(str(tmp_path / "nowhere")), {})
    assert missing["model_source"] == "local" and identity_problem(missing) is not None


def test_inherited_knobs_are_those_that_shape_a_run_and_no_secret_is_kept(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    spec = _spec(
        str(folder),
        command=["/opt/vllm/bin/vllm", "serve", "--api-key", SECRET],
        env={"HF_TOKEN": SECRET, "VLLM_NO_USAGE_STATS": "1"},
    )
    env = {
        "VLLM_ATTENTION_BACKEND": "FLASHINFER",
        "CUDA_VISIBLE_DEVICES": "1",
        "VLLM_API_KEY": SECRET,
        "VLLM_RPC_BASE_PATH": "/tmp/ipc",  # a per-start folder: shapes nothing
        "VLLM_PYTHON": "/opt/vllm/bin/python",  # the lab's own setting
        "HOME": "/home/ada",
        "OMP_NUM_THREADS": f"http://ada:{SECRET}@proxy",  # secret-shaped text in a knob
    }
    identity = engine_identity(spec, env)
    assert SECRET not in json.dumps(identity)
    assert identity["env"] == {"VLLM_NO_USAGE_STATS": "1"}
    assert set(identity["inherited_env"]) == {
        "VLLM_ATTENTION_BACKEND",
        "CUDA_VISIBLE_DEVICES",
        "OMP_NUM_THREADS",
    }
    assert identity_problem(identity) is None
    assert engine_identity(spec, env) == identity  # the same each time: comparable
