"""Issue 39, item 6: what the fleet goes on after leaves one line on stderr. Closing a worker that
was gone, a run's status Ray could not give, Ray's config refresh and the guard's stops were each
`except ...: pass`, so a fleet that misbehaved said nothing. No Ray cluster: Ray's side is a
stand-in that raises (fast tier)."""

from __future__ import annotations

import sys
import types
from typing import Any

import psutil
import pytest

import tuning.decide.fleet as fleet
from tuning.decide.fleet import guard
from tuning.decide.fleet.executor import FleetDriver, Flight
from tuning.decide.fleet.schedule import Job, Slot


class Method:
    def __init__(self, name: str) -> None:
        self.name = name

    def remote(self) -> str:
        return f"ref:{self.name}"


class Actor:
    close = Method("close")
    status = Method("status")


class RayThatFails:
    """Ray's calls as the driver makes them; `get` raises as a dead actor's would."""

    def __init__(self) -> None:
        self.killed: list[Any] = []

    def get(self, ref: Any, timeout: float | None = None) -> Any:
        raise RuntimeError(f"The actor died unexpectedly\nbefore {ref} finished")

    def wait(self, refs: list[Any], timeout: float = 0) -> tuple[list[Any], list[Any]]:
        return list(refs), []

    def kill(self, actor: Any) -> None:
        self.killed.append(actor)


class Runner:
    def __init__(self) -> None:
        self.live: list[dict[str, Any]] = []

    def set_live(self, **fields: Any) -> None:
        self.live.append(fields)


def driver() -> FleetDriver:
    """The driver without Ray: only what closing and polling use."""
    d = FleetDriver.__new__(FleetDriver)
    d.ray, d.runner, d.actors, d.flights = RayThatFails(), Runner(), {}, {}
    return d


def test_closing_a_gone_worker_says_so_and_still_kills_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d, slot, actor = driver(), Slot("node-a", 0, "host-a"), Actor()
    d.actors[slot] = actor
    d._release(slot)
    assert d.ray.killed == [actor] and slot not in d.actors
    (line,) = capsys.readouterr().err.splitlines()  # one line, the message's own break folded
    assert line == (
        f"fleet: closing the worker of slot {slot} failed; killing it: RuntimeError: "
        "The actor died unexpectedly before ref:close finished"
    )


def test_a_status_ray_could_not_give_is_said_and_asked_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    d = driver()
    flight = Flight(Job(0, 4, 0), Slot("node-a", 0), Actor(), "ref:run", 17, status_ref="ref:s")
    d.flights["ref:run"] = flight
    d._poll_phases()
    err = capsys.readouterr().err
    assert err.startswith("fleet: run 17's status from Ray: RuntimeError: The actor died")
    assert flight.status_ref == "ref:status"  # asked again for the next poll
    assert d.runner.live[-1]["requests_done"] == 0


def test_a_config_refresh_that_fails_is_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ray imported before the lab set RAY_AUTH_MODE: the refresh of its cached config failed in
    silence, and the driver connected without its token."""
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(fleet, "require_ray", lambda: None)  # Ray need not be installed here
    monkeypatch.setitem(sys.modules, "ray", types.ModuleType("ray"))
    monkeypatch.setitem(sys.modules, "ray._raylet", None)  # importing it raises
    assert fleet.import_ray() is sys.modules["ray"]
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(
        "fleet: refreshing Ray's config for RAY_AUTH_MODE=token failed: ModuleNotFoundError: "
    )


def test_the_guard_says_what_it_could_not_stop(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def survivor(pgid: int, grace: float, timeout: float) -> None:
        raise RuntimeError(f"process group {pgid} survived SIGKILL")

    class Unkillable:
        def __init__(self, pid: int) -> None:
            self.pid = pid

        def kill(self) -> None:
            raise psutil.AccessDenied(self.pid)

    monkeypatch.setattr(guard, "stop_group", survivor)
    monkeypatch.setattr(guard, "same_process", lambda pid, started: True)
    monkeypatch.setattr(guard.psutil, "Process", Unkillable)
    monkeypatch.setattr(guard.ipc_dir, "folder_of", lambda pid: None)
    monkeypatch.setattr(guard.ipc_dir, "remove", lambda folder: None)
    guard.reap_orphans({4242: (1.0, 4242)}, grace=0)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "fleet: stopping process group 4242: RuntimeError: process group 4242 survived SIGKILL",
        "fleet: killing pid 4242: AccessDenied: (pid=4242)",
    ]
