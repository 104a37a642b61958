"""The fleet: an experiment's runs in parallel on many GPUs and nodes, through Ray (optional).

cluster (start a local Ray or connect to one; its slots), worker (the actor that executes one run
with the local run's code), guard (stops a dead worker's servers), placement (where a run ran),
schedule (which run goes to which slot), executor (the driver loop the runner calls instead of its
per-value loop). Ray is imported only when the fleet is used; without it the lab works as before.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuning.settings import Settings

INSTALL_HINT = "the fleet needs Ray: run `make fleet` (installs the pinned ray into .venv)"
SLOT_RESOURCE = "lab_slot"  # the Ray custom resource one run takes (a GPU set, or a CPU slot)


class FleetError(RuntimeError):
    """The fleet cannot be used (Ray missing, no cluster, no slot); the message says what to do."""


def swallowed(what: str, exc: BaseException) -> None:
    """One line on stderr for an error the fleet goes on after (closing an actor that is gone, a
    status Ray could not give): 'fleet: WHAT: TypeName: message', never silence."""
    text = " ".join(str(exc).split())
    print(f"fleet: {what}: {type(exc).__name__}{': ' + text if text else ''}", file=sys.stderr)


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
            except Exception as exc:  # Ray then keeps the auth mode it read at its import
                swallowed("refreshing Ray's config for RAY_AUTH_MODE=token failed", exc)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    return ray


def _count(text: str, name: str, least: int) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        count = int(text)
    except ValueError:
        raise FleetError(f"{name} must be a whole number, got {text!r}") from None
    if count < least:
        raise FleetError(f"{name} must be at least {least}")
    return count


def options_from_settings(settings: Settings) -> dict[str, Any] | None:
    """The fleet options Settings hold (None: no fleet), as the CLI's flags would give them
    (`tuning.decide.fleet.cluster.FleetOptions.to_dict`); FleetError when they are unusable."""
    mode = settings.fleet.strip() or "none"
    if mode == "none":
        return None
    if mode not in ("local", "ray"):
        raise FleetError(f"fleet must be none, local or ray, got {mode!r}")
    return {
        "mode": mode,
        "slots": _count(settings.fleet_slots, "slots", 1),
        "address": settings.fleet_ray_address.strip() or "auto",
        "gpus_per_run": _count(settings.fleet_gpus_per_run, "GPUs per run", 0),
    }


def describe_options(options: dict[str, Any] | None) -> str:
    """One line for the UI: where the runs go."""
    if options is None:
        return "fleet: none (Settings → Fleet); the runs go one after another on this machine"
    slots = options.get("slots") or "default"
    if options["mode"] == "local":
        where = f"a Ray the lab starts here with {slots} slots"
    else:
        where = f"the Ray cluster at {options['address']} ({slots} slots)"
    gpus = options.get("gpus_per_run")
    return f"fleet: {where}, GPUs per run: {'tensor-parallel size' if gpus is None else gpus}"


def attach_fleet(path: Path, experiment_id: int, options: dict[str, Any] | None) -> None:
    """Store the fleet options with the planned experiment (its runner reads them, a resume too)."""
    if options is None:
        return
    from store import connect, repo

    with connect(path) as db:
        repo.update_experiment(db, experiment_id, fleet_json=options)
