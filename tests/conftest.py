"""Shared fixtures: a throwaway lab home and DB per test, and the real embedded engine when built."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuning.engine import embedded_spec, venv_python

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def lab_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "lab"
    monkeypatch.setenv("TUNING_LAB_HOME", str(home))
    monkeypatch.delenv("TUNING_LAB_DB", raising=False)
    monkeypatch.setenv("TUNING_LAB_LOCK", str(tmp_path / "runner.lock"))
    return home


@pytest.fixture
def fresh_db(lab_home: Path) -> Path:
    from store import open_db

    path = lab_home / "lab.db"
    open_db(path).conn.close()
    return path


def engine_available() -> bool:
    return venv_python().exists() and (Path(embedded_spec().model) / "config.json").exists()


@pytest.fixture
def engine(lab_home: Path) -> Iterator[object]:
    """The embedded engine; `make test` builds it first, so there it must exist."""
    if not engine_available():
        if os.environ.get("TUNING_LAB_REQUIRE_ENGINE"):
            pytest.fail("the embedded engine is not built: run `make setup`")
        pytest.skip("embedded engine not built (run `make setup`)")
    yield embedded_spec()
