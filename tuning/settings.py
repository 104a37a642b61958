"""The lab's settings: one object, one precedence (explicit argument > environment > file >
default).

Settings live in `settings.json` under the lab's home folder (`TUNING_LAB_HOME`, default `data/` in
the repo), so the CLI, the runner process and every browser tab read the same values.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from core import json_depth

REPO_ROOT = Path(__file__).resolve().parents[1]


def lab_home() -> Path:
    return Path(os.environ.get("TUNING_LAB_HOME") or REPO_ROOT / "data")


def configured_db_path() -> Path:
    """TUNING_LAB_DB or the lab home's lab.db, as named (a .db.xz not expanded)."""
    return Path(os.environ.get("TUNING_LAB_DB") or lab_home() / "lab.db")


def default_db_path() -> Path:
    """TUNING_LAB_DB or the lab home's lab.db; a compressed snapshot (.db.xz) opens as its copy."""
    path = configured_db_path()
    if path.suffix not in (".xz", ".gz"):  # store (sqlite-utils, pandas) only when needed: the
        return path  # CLI's parser calls this for its --db help (tests/tuning/cli/test_main.py)
    from store import snapshot

    return snapshot.expanded(path)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no passwd entry in some containers
        return "unknown"


@dataclass
class Settings:
    # "embedded" = the CPU engine built by `make setup`; "custom" = the user's own vLLM.
    engine: str = "embedded"
    # For a custom engine: an interpreter path (runs `-m vllm.entrypoints.openai.api_server`) or a
    # full command such as "/opt/vllm/bin/vllm serve" (split on spaces, never run through a shell).
    engine_command: str = ""
    engine_model: str = ""
    engine_backend: str = "gpu"
    engine_load_format: str = ""
    # Empty: the model's last path component (tuning.engine.current.custom_spec); the embedded
    # engine's is
    # always "tiny".
    served_model_name: str = ""
    author: str = ""
    host_name: str = ""
    team_folder: str = ""
    # The fleet (tuning.decide.fleet): "none", "local" (a Ray the lab starts, `fleet_slots` slots;
    # empty:
    # one per GPU set, two on a CPU machine) or "ray" (the cluster at `fleet_ray_address`);
    # `fleet_gpus_per_run` empty: the tensor-parallel size on GPU nodes.
    fleet: str = "none"
    fleet_slots: str = ""
    fleet_ray_address: str = "auto"
    fleet_gpus_per_run: str = ""
    # "off" (or 0): never spawn the next server ahead to import while the previous one stops
    # (tuning.engine.prelaunch); TUNING_LAB_PRELAUNCH=0 for one process.
    prelaunch: str = "on"

    def resolved_author(self) -> str:
        return self.author or _os_user()

    def resolved_host(self) -> str:
        return self.host_name or socket.gethostname()


def settings_path() -> Path:
    return lab_home() / "settings.json"


def load_settings(path: Path | None = None) -> Settings:
    target = path or settings_path()
    data: dict[str, Any] = {}
    if target.exists():
        try:
            data = json_depth.loads(target.read_text())  # TooDeep is a ValueError
        except (OSError, ValueError):
            data = {}
    known = {f.name for f in fields(Settings)}
    settings = Settings(**{k: v for k, v in data.items() if k in known and isinstance(v, str)})
    for f in fields(Settings):
        env = os.environ.get("TUNING_LAB_" + f.name.upper())
        if env is not None:
            setattr(settings, f.name, env)
    return settings


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    target = path or settings_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(settings), indent=2, sort_keys=True))
    tmp.replace(target)
    return target
