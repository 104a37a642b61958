"""The pages' shared fixtures: the terminal token a `make run` app has (ui/terminal_token.py), and
New experiment on the fake engine with its runner's spawn recorded instead of run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.engines import fake_settings_env
from ui import terminal_token


@pytest.fixture
def terminal_token_issued() -> Iterator[str]:
    """This process's app has a terminal token, as under `make run`; none again afterwards."""
    try:
        yield terminal_token.issue()
    finally:
        terminal_token.revoke()


@pytest.fixture
def spawned(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The fake engine configured; the experiment ids a page asked a runner for, none started."""
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    started: list[int] = []
    monkeypatch.setattr(
        "tuning.experiment.supervisor.spawn_runner", lambda path, exp_id: started.append(exp_id)
    )
    return started
