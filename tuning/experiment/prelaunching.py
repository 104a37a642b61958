"""The next run's server spawned ahead (tuning.engine.prelaunch): once a restarting run's load is
over, the next run's server is spawned and does its Python imports while this run stores and its
server stops; the next run lets it go once the previous server's port and device memory are free.

On a GPU engine with cores to spare (`beside_load`), the next server is spawned as this run's load
begins instead, when that run starts a server of its own: its imports use a core the load does not,
and it touches the device only once let go. A CPU engine's cores are the load's: it waits.

Only the next run's own start: spawned with that run's launch (its value, its own port and log,
named by the uid the run then takes), adopted only when the run asks for exactly that launch, and
stopped otherwise, on Stop, or when the runner closes (never an orphan: a launcher whose input
closes exits without starting anything).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from store import repo
from tuning.engine import prelaunch
from tuning.engine.launch import Launch
from tuning.engine.prelaunch import PrelaunchedServer

SPARE_CORES = 8  # a machine with fewer gives its cores to the load (and the CPU engine)


def beside_load(backend: str, cores: int | None) -> bool:
    """Spawn the next run's server as this run's load begins? On a GPU engine with SPARE_CORES
    cores or more: the imports take one of them, never the device."""
    return backend == "gpu" and (cores or 1) >= SPARE_CORES


@dataclass
class Ahead:
    """A server spawned for the run at `at` (value, repeat), whose row will take `uid`."""

    at: tuple[Any, int]
    uid: str
    server: PrelaunchedServer


def _shape(launch: Launch) -> tuple[Any, ...]:
    """A launch without its port (the one thing two launches of one configuration differ in)."""
    argv = list(launch.argv)
    if "--port" in argv:
        i = argv.index("--port")
        del argv[i : i + 2]
    env = sorted(launch.env.items())
    return tuple(argv), tuple(env), tuple(launch.unset_env), launch.host


def same_start(a: Launch, b: Launch) -> bool:
    """Would these two launches start the same server (but for the port)?"""
    return _shape(a) == _shape(b)


def spawn(at: tuple[Any, int], launch: Launch, log_path_of: Callable[[str], Path]) -> Ahead | None:
    """Spawn `launch` prelaunched for the run at `at`; None when it is off, the command cannot be
    wrapped, or the spawn failed (the run then starts as it always did)."""
    if not prelaunch.enabled() or prelaunch.wrap(launch.argv) is None:
        return None
    uid = repo.new_uid()
    log_path: Path = log_path_of(uid)
    try:
        server = PrelaunchedServer(launch, log_path)
        server.start()
    except Exception as exc:  # noqa: BLE001 (a port taken meanwhile: the run starts plainly)
        print(f"runner: next server not spawned ahead: {exc}", file=sys.stderr, flush=True)
        return None
    return Ahead(at, uid, server)


def discard(ahead: Ahead | None) -> None:
    """Stop a server spawned ahead that will not be used (its group gone, its port never bound)."""
    if ahead is None:
        return
    try:  # a port it never bound is not its own to wait for
        ahead.server.stop(grace=5.0, port_was_ours=ahead.server.released_at is not None)
    except Exception as exc:  # noqa: BLE001 (the next start's own checks still hold)
        print(f"runner: a server spawned ahead did not stop: {exc}", file=sys.stderr, flush=True)
