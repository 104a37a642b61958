"""What a resident experiment on a GPU no longer waits for (issue 38, items 2 and 3), on the fake
vLLM as a CUDA engine: its vLLM's flags are read beside the first start when the version says it
has sleep mode (the 18.6 s of an H100's first run), and checked before the first switch (a parser
without the flag falls back, saying so); and on a machine with cores to spare, a value's next
server is spawned as the current run's load begins, imports meanwhile, and is let go only once
the one in hand is asleep: never two awake, every run's anatomy still adding up; and each run's
load generator is started while the run before it is stored."""

from __future__ import annotations

import dataclasses
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from store import connect
from tests.fakes.engines import fake_spec
from tests.tuning.experiment.test_resident import _run, _two_awake
from tuning.engine import learn
from tuning.engine.flags.catalog import Catalog
from tuning.engine.sleep_mode import SLEEP_FLAG, sleep_flag_by_version
from tuning.experiment import prelaunching
from tuning.experiment.resident_when import sleep_mode_flags
from tuning.experiment.run_anatomy import adds_up
from tuning.measure.loadgen import child as loadgen_child

READ_S = 3.0  # a slow parser read, as a GPU box's first one is


def test_the_vllm_version_says_whether_it_has_sleep_mode() -> None:
    assert sleep_flag_by_version("0.25.0") and sleep_flag_by_version("0.11.1rc2.dev3+g1")
    assert sleep_flag_by_version("v1.0") and sleep_flag_by_version("0.8.0")
    assert not sleep_flag_by_version("0.7.3") and not sleep_flag_by_version("0.6.6.post1")
    assert not sleep_flag_by_version("unknown") and not sleep_flag_by_version(None)


def test_spare_cores_decide_whether_the_next_server_imports_beside_the_load() -> None:
    assert prelaunching.beside_load("gpu", 16) and prelaunching.beside_load("gpu", 8)
    assert not prelaunching.beside_load("gpu", 2)  # this test bed: the load's cores
    assert not prelaunching.beside_load("gpu", None)
    assert not prelaunching.beside_load("cpu", 64)  # a CPU engine's cores are the load's


def _slow_read(monkeypatch: pytest.MonkeyPatch, drop_sleep: bool = False) -> list[float]:
    """The parser read takes READ_S (and, with `drop_sleep`, lacks sleep mode); when each read
    ended, returned."""
    ended: list[float] = []
    real = learn.read_catalog

    def read(python: str) -> Catalog:
        time.sleep(READ_S)
        catalog = real(python)
        if drop_sleep:
            raw = catalog.to_dict()
            raw["flags"] = [f for f in raw["flags"] if f["name"] != SLEEP_FLAG]
            catalog = Catalog.from_dict(raw)
        ended.append(time.monotonic())
        return catalog

    monkeypatch.setattr(learn, "read_catalog", read)
    return ended


def test_a_first_experiment_reads_the_flags_beside_its_first_start(
    sleepy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = _slow_read(monkeypatch)
    began = time.monotonic()
    exp, runs = _run(sleepy, repeats=2)
    assert exp["resident"]["used"] is True and not exp["resident"].get("fallback")
    assert [r["startup"].get("resident") for r in runs] == ["start", "start", "switch", "switch"]
    # the first run did not wait for the read: its server was up before the read was over
    prepare = sum(p["seconds"] for p in runs[0]["anatomy"]["parts"] if p["key"] == "prepare")
    assert prepare < READ_S / 2, runs[0]["anatomy"]
    assert len(ended) == 1 and ended[0] - began >= READ_S
    # and it was cached for the next experiment, which reads nothing
    with connect(sleepy / "lab.db", readonly=True) as db:
        assert db.execute("SELECT COUNT(*) FROM engine_flags").fetchone()[0] == 1
    flags, reading = sleep_mode_flags(sleepy / "lab.db", fake_spec())
    assert reading is None and flags is not None and SLEEP_FLAG in flags and len(ended) == 1


def test_an_older_vllm_has_its_flags_read_before_the_first_start(
    sleepy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ended = _slow_read(monkeypatch)
    old = dataclasses.replace(fake_spec(), vllm_version="0.7.3")
    flags, reading = sleep_mode_flags(sleepy / "lab.db", old)
    assert reading is None and len(ended) == 1  # read now, not beside
    assert flags is not None and SLEEP_FLAG in flags


def test_a_parser_without_sleep_mode_falls_back_before_the_first_switch(
    sleepy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _slow_read(monkeypatch, drop_sleep=True)
    exp, runs = _run(sleepy, repeats=2)
    state = exp["resident"]
    assert state["fallback"] == f"this vLLM has no --{SLEEP_FLAG}"
    assert [r["status"] for r in runs] == ["done"] * 4
    # both values' first starts ran before the read was in; no run switched
    assert [r["startup"].get("resident") or "restart" for r in runs] == [
        "start",
        "start",
        "restart",
        "restart",
    ]
    assert state["switches"] == 0 and state["asleep"] == []
    assert all(t.name != "read-engine-flags" for t in threading.enumerate())


def test_the_next_server_imports_beside_the_load_and_goes_once_the_last_sleeps(
    sleepy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_s = 1.5
    monkeypatch.setenv("FAKE_VLLM_IMPORT_S", str(import_s))
    monkeypatch.setattr(prelaunching, "SPARE_CORES", 1)  # as on a GPU box's many cores
    ready: list[bool] = []  # for each run's load: was its load generator started ahead?
    real_take = loadgen_child._take

    def take(python: str) -> Any:
        ready.append(python in loadgen_child._spare)
        return real_take(python)

    monkeypatch.setattr(loadgen_child, "_take", take)
    exp, runs = _run(sleepy)
    # every load generator but the first was started while the run before it was stored, and
    # the one started after the last run was ended with the runner
    assert ready == [False] + [True] * 7 and loadgen_child._spare == {}
    assert [r["status"] for r in runs] == ["done"] * 8 and exp["resident"]["used"] is True
    modes = [r["startup"].get("resident") or "restart" for r in runs]
    for i, run in enumerate(runs):
        anat = run["anatomy"]
        assert adds_up(anat), anat
        hidden = [p["seconds"] for p in anat["overlapped"] if p["key"] == "prelaunch_ahead"]
        if i > 0 and modes[i] == "start":  # every start but the first was spawned ahead
            # spawned during the last run's load, let go after that one slept: what its imports
            # had done by then was hidden (the fake's load is shorter than its imports)
            assert len(hidden) == 1 and hidden[0] > 0, (i, anat)
            tth = run["time_to_healthy_s"]
            assert tth >= import_s and hidden[0] <= tth  # its imports count in its time to healthy
            assert run["startup"]["anatomy"]["phases"][0]["key"] == "prelaunch_imports"
        else:
            assert hidden == [], (i, anat)
    assert modes.count("start") >= 3  # values' first starts and a real restart at repeat 3
    # a server spawned ahead has a port of its own: its fresh KV is read there, so the KV after
    # a wake is compared with it (the H100 run of 2026-12-07 stored None for the value started so)
    after = exp["resident"]["kv_after_wake"]
    assert after["fresh_tokens"] is not None and after["fresh_tokens"] == after["woken"], after
    assert not _two_awake(sleepy / "awake.jsonl")
