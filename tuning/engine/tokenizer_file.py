"""Where a model's tokenizer.json is on this machine: the model's own folder (a local path) or its
snapshot in the Hugging Face cache (a hub id), the way `model_config` finds its config.json. The
lab downloads nothing: a model in neither place has no tokenizer here, and the answer says why."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tuning.engine.find import hub_caches, is_local_model

TOKENIZER_FILE = "tokenizer.json"


def model_tokenizer(
    model: str, environ: Mapping[str, str] | None = None
) -> tuple[Path | None, str]:
    """(the model's tokenizer.json, "") from a local folder (or the file itself) or the newest
    Hugging Face cache snapshot that has one, else (None, why)."""
    env = os.environ if environ is None else environ
    if not model.strip():
        return None, "no model set"
    if is_local_model(model):
        local = Path(model).expanduser()
        path = local / TOKENIZER_FILE if local.is_dir() else local
        if not path.is_file():
            return None, f"{path} does not exist"
        return path, ""
    repo = "models--" + model.strip("/").replace("/", "--")
    hits = [
        snap / TOKENIZER_FILE
        for cache in hub_caches(env)
        for snap in sorted((cache / repo / "snapshots").glob("*"))
        if (snap / TOKENIZER_FILE).is_file()
    ]
    if not hits:
        return None, f"no {TOKENIZER_FILE} in the Hugging Face cache on this machine"
    return max(hits, key=lambda p: p.stat().st_mtime), ""
