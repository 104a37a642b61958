"""The fleet from the UI (AppTest): Settings keeps a fleet section like its other settings, and New
experiment's "Run on the fleet" stores those options with the experiment it spawns a runner for
(the runner, like `experiment --fleet`, reads them from the experiment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import connect, queries
from tests.apptest import open_page, page_text
from tests.fakes.engines import fake_settings_env
from tuning.settings import Settings, save_settings, settings_path


def test_settings_page_saves_the_fleet_and_refuses_a_bad_slot_count(lab_home: Path) -> None:
    at = open_page("app_pages/6_Settings.py")
    at.radio(key="set_fleet").set_value("local").run()
    at.text_input(key="set_fleet_slots").set_value("three").run()
    at.button(key="set_save").click().run()
    assert any("not saved" in e.value and "slots" in e.value for e in at.error)
    assert not settings_path().exists()
    at.text_input(key="set_fleet_slots").set_value("3").run()
    at.text_input(key="set_fleet_gpus").set_value("0").run()
    at.button(key="set_save").click().run()
    assert not at.exception, at.exception
    saved = json.loads(settings_path().read_text())
    assert (saved["fleet"], saved["fleet_slots"], saved["fleet_gpus_per_run"]) == (
        "local",
        "3",
        "0",
    )
    assert saved["fleet_ray_address"] == "auto"
    again = open_page("app_pages/6_Settings.py")  # a fresh session reads them back
    assert again.radio(key="set_fleet").value == "local"
    assert again.text_input(key="set_fleet_slots").value == "3"


def _new_experiment(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings, on_fleet: bool
) -> tuple[Any, list[int]]:
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    save_settings(settings)
    spawned: list[int] = []
    monkeypatch.setattr(
        "tuning.experiment.supervisor.spawn_runner", lambda path, exp_id: spawned.append(exp_id)
    )
    at = open_page("app_pages/1_New_experiment.py")
    box = at.checkbox(key="new_fleet")
    if on_fleet:
        assert not box.disabled
        box.check().run()
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    return at, spawned


def test_new_experiment_runs_on_the_fleet_of_the_settings(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = Settings(fleet="ray", fleet_ray_address="10.0.0.5:6379", fleet_slots="4")
    at, spawned = _new_experiment(lab_home, monkeypatch, fleet, on_fleet=True)
    assert "the Ray cluster at 10.0.0.5:6379 (4 slots)" in page_text(at)
    assert len(spawned) == 1
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    assert exp["fleet"] == {
        "mode": "ray",
        "slots": 4,
        "address": "10.0.0.5:6379",
        "gpus_per_run": None,
    }


def test_new_experiment_without_the_box_or_without_a_fleet_runs_locally(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, spawned = _new_experiment(lab_home, monkeypatch, Settings(fleet="local"), on_fleet=False)
    with connect(lab_home / "lab.db") as db:
        assert not queries.get_experiment(db, spawned[0]).get("fleet")
    save_settings(Settings(fleet="none"))
    at = open_page("app_pages/1_New_experiment.py")
    assert at.checkbox(key="new_fleet").disabled
    assert "fleet: none" in page_text(at)
