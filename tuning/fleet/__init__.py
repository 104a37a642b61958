"""The fleet: an experiment's runs in parallel on many GPUs and nodes, through Ray (optional).

cluster (start a local Ray or connect to one; its slots), worker (the actor that executes one run
with the local run's code), guard (stops a dead worker's servers), placement (where a run ran),
schedule (which run goes to which slot), executor (the driver loop the runner calls instead of its
per-value loop). Ray is imported only when the fleet is used; without it the lab works as before.
"""

from __future__ import annotations

import os
import sys
from typing import Any

INSTALL_HINT = "the fleet needs Ray: run `make fleet` (installs the pinned ray into .venv)"
SLOT_RESOURCE = "lab_slot"  # the Ray custom resource one run takes (a GPU set, or a CPU slot)


class FleetError(RuntimeError):
    """The fleet cannot be used (Ray missing, no cluster, no slot); the message says what to do."""


def ray_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def require_ray() -> None:
    if not ray_available():
        raise FleetError(INSTALL_HINT)


def import_ray() -> Any:
    """Ray, with token authentication on for this process (`RAY_AUTH_MODE=token`, unless the
    user set it): clusters Ray starts use the token in ~/.ray/auth_token, and a driver that
    connects sends it only when told so. Ray reads the mode when it is first imported; if it was
    imported before, its cached config is refreshed."""
    require_ray()
    already = "ray" in sys.modules
    if os.environ.get("RAY_AUTH_MODE") is None:
        os.environ["RAY_AUTH_MODE"] = "token"
        if already:
            try:
                import importlib

                config = vars(importlib.import_module("ray._raylet")).get("Config")
                if config is not None:
                    config.initialize("")
            except Exception:
                pass
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    return ray
