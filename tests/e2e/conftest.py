"""A real browser for the browser tier: Debian's chromium through Playwright (Playwright's own
download fails on these machines), one per test, so no Playwright instance outlives its test; and
the app served on a fresh lab of its own (tools/browser.py, shared with `make screenshots`)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.parts import missing
from tools.browser import CHROMIUM, chromium, serve_app
from tuning.engine.spec import EngineSpec


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        missing("Debian's chromium", "make browser")
    with chromium() as launched:
        yield launched


@pytest.fixture
def app_home(tmp_path: Path) -> Path:
    """The fresh lab the app of `app_url` serves (its DB: app_home / "lab.db")."""
    return tmp_path / "lab"


@pytest.fixture
def app_url(built_engine: EngineSpec, app_home: Path, tmp_path: Path) -> Iterator[str]:
    """The app as `make run` starts it on a fresh lab with the embedded engine; any runner the page
    started is stopped afterwards."""
    try:
        with serve_app(app_home, tmp_path / "streamlit.log") as url:
            yield url
    finally:
        _stop_runners(app_home / "lab.db")


def _stop_runners(db_path: Path) -> None:
    """The runner process the page started has its own session; stop it if it is still there."""
    from store import open_db, queries
    from tuning.experiment.supervisor import reap_stale

    if db_path.exists():
        for exp in queries.active_experiments(open_db(db_path)):
            if exp.get("runner_pid"):
                try:
                    os.killpg(int(exp["runner_pid"]), signal.SIGTERM)
                except ProcessLookupError:
                    pass
        reap_stale(db_path)
