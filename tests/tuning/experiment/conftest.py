"""What every fault and state test of the runner checks at the end: no process started for this
test's lab home is still alive (servers, their EngineCores and holders, load generators)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.fakes.fake_vllm_server import AWAKE_ENV
from tests.fakes.gpu_box import FAKE_VLLM_PKG, REPO


def leftovers(home: Path) -> list[psutil.Process]:
    """Live processes whose environment names `home` as the lab's home: started for this test."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid == psutil.Process().pid or proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("TUNING_LAB_HOME") == str(home):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def wait_no_leftovers(home: Path, timeout: float = 10.0) -> list[psutil.Process]:
    """An orphan is reaped by init a moment after it exits: wait a little before judging."""
    deadline = time.monotonic() + timeout
    while (left := leftovers(home)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def no_leftovers(lab_home: Path) -> Iterator[Path]:
    """The test's lab home; after the test, assert nothing started for it is left running."""
    yield lab_home
    left = wait_no_leftovers(lab_home)
    names = [(p.pid, " ".join(p.cmdline())[:120]) for p in left]
    for proc in left:  # ours by construction (this test's home): clean up, then fail
        try:
            proc.kill()
        except psutil.Error:
            pass
    assert not names, f"processes left behind: {names}"


@pytest.fixture
def sleepy(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The lab home, the fake vllm package importable by the engine's interpreter (its flags,
    --enable-sleep-mode among them, are read from it), and each server's awake record."""
    path = os.pathsep.join([str(FAKE_VLLM_PKG), str(REPO)])
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.setenv(AWAKE_ENV, str(lab_home / "awake.jsonl"))
    return lab_home
