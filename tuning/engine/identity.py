"""What a run's engine is, as reuse compares it (issue 41): every part of a start that shapes a
number besides the flag configuration, stored on each run row (`runs.engine_identity_json`) when
the row is created, so a run says itself which engine measured it.

The parts: the engine command before the lab's flags (the interpreter or `vllm serve` with every
argument the user gave it), the model as given (a folder or file path, or a hub id) with the
sha256 of its config.json (read from the folder, or from the Hugging Face cache for a hub id;
nothing is downloaded), the served name, the load format, the engine's environment, and the
environment knobs the server inherits from the lab's own environment (`VLLM_*` and the other
prefixes below). The flag configuration, the vLLM version, the backend, the hardware and the
workload are run columns of their own; tuning.experiment.reuse_match puts them together.

What it cannot see: a model's weights (a folder whose weights were replaced under the same
config.json reads the same), a hub repo changed upstream while the cache still holds the old
snapshot, and what a teammate's machine really is (a bundle's rows are what its author wrote).
A part the lab could not read is stored as unknown, and a run with an unknown part is never
offered for reuse.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.redact import is_secret_key, scrub_json
from tuning.engine.find import is_local_model, model_config
from tuning.engine.spec import EngineSpec

CONFIG_NAME = "config.json"
MAX_CONFIG_BYTES = 4 << 20  # a model's config.json is a few KB; past this it is not one
# Environment the server inherits from the lab that shapes what vLLM (or torch under it) does.
INHERITED_PREFIXES = ("VLLM_", "CUDA_", "NCCL_", "OMP_", "MKL_", "PYTORCH_", "TORCH_")
# ...except the lab's own settings and the per-start IPC folder, which shape no number.
NOT_SHAPING = frozenset({"VLLM_RPC_BASE_PATH", "VLLM_PYTHON", "VLLM_MODEL"})
MODEL_SOURCES = ("local", "hub")
KEYS = (
    "command",
    "model",
    "model_source",
    "model_config_sha256",
    "served_model_name",
    "load_format",
    "env",
    "inherited_env",
)


def config_sha256(path: Path) -> str | None:
    """The sha256 of a config.json's bytes (at most MAX_CONFIG_BYTES read); None when it cannot
    be read or is larger."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest() if len(data) <= MAX_CONFIG_BYTES else None


def model_identity(model: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The model as given and its config's hash: a local folder or file must have a readable
    config.json (else the hash is None: unknown); a hub id is hashed from the cached snapshot
    when this machine holds one (None: not downloaded here, the id alone names it)."""
    if is_local_model(model):
        local = Path(model).expanduser()
        path = local / CONFIG_NAME if local.is_dir() else local
        return {"model": model, "model_source": "local", "model_config_sha256": config_sha256(path)}
    found, _why = model_config(model, environ)
    digest = config_sha256(found) if found is not None else None
    return {"model": model, "model_source": "hub", "model_config_sha256": digest}


def inherited_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The knobs a server started now inherits from the lab's environment (no secret-named one:
    its value would be stored)."""
    env = os.environ if environ is None else environ
    return {
        name: value
        for name, value in sorted(env.items())
        if name.startswith(INHERITED_PREFIXES)
        and name not in NOT_SHAPING
        and not is_secret_key(name)
    }


def engine_identity(engine: EngineSpec, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What `runs.engine_identity_json` holds for a run of `engine` started from this process:
    scrubbed as every stored value is (no secret-named variable, no secret-shaped text), the
    same way each time, so the identity stays comparable."""
    identity = {
        "command": list(engine.command),
        **model_identity(engine.model, environ),
        "served_model_name": engine.served_model_name,
        "load_format": engine.load_format or None,
        "env": {k: str(v) for k, v in sorted(engine.env.items()) if not is_secret_key(k)},
        "inherited_env": inherited_env(environ),
    }
    clean: dict[str, Any] = scrub_json(identity)
    return clean


def identity_problem(identity: Any) -> str | None:
    """Why a stored identity cannot vouch for a run (None: it can): missing (a row written before
    the lab stored it), of another shape, or with a part the lab could not read."""
    if not isinstance(identity, dict):
        return "the run does not say which engine measured it"
    if set(identity) != set(KEYS):
        return "the run's engine identity is not one this lab writes"
    command, model = identity["command"], identity["model"]
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        return "the run's engine command is unknown"
    if not isinstance(model, str) or not model or identity["model_source"] not in MODEL_SOURCES:
        return "the run's model is unknown"
    sha = identity["model_config_sha256"]
    if sha is not None and not isinstance(sha, str):
        return "the run's model config hash is not a hash"
    if identity["model_source"] == "local" and not sha:
        return f"the config.json of the run's model {model} could not be read"
    for key in ("env", "inherited_env"):
        env = identity[key]
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            return f"the run's engine {key} is unknown"
    return None
