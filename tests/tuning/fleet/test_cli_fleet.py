"""The fleet flags without Ray: `experiment --fleet` says how to install it and runs nothing; the
lab without --fleet works as before; `fleet status` refuses the same way."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from store import connect
from tuning.cli.main import main


@pytest.fixture
def no_ray(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "ray" else real(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)


def test_fleet_without_ray_says_make_fleet(
    no_ray: None, fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
        "--values",
        "2,4",
        "--fleet",
        "local",
    ]
    assert main([*argv, "--db", str(fresh_db)]) == 1
    err = capsys.readouterr().err
    assert "make fleet" in err and "Ray" in err
    with connect(fresh_db) as db:
        assert db.table("experiments").count == 0  # nothing planned
    assert main(["fleet", "status"]) == 1
    assert "make fleet" in capsys.readouterr().err


@pytest.mark.usefixtures("ray_installed")
def test_fleet_flags_are_checked_before_planning(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [
        "experiment",
        "--repeats",
        "1",
        "--param",
        "max-num-seqs",
        "--values",
        "2",
        "--db",
        str(fresh_db),
    ]
    assert main([*base, "--fleet", "local", "--slots", "0"]) == 1
    assert "--slots" in capsys.readouterr().err
    assert main([*base, "--fleet", "ray", "--base-url", "http://127.0.0.1:1"]) == 1
    assert "--base-url" in capsys.readouterr().err
