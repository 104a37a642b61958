"""A real browser (Debian's chromium through Playwright) against `streamlit run app.py`: start an
experiment on the embedded engine, watch the live page reach completion, open the compare page and
download a PNG. With TUNING_LAB_SCREENSHOTS=DIR (`make screenshots`) the README's screenshots are
written there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.checks import png_size, wait_for
from tuning.engine import EngineSpec
from tuning.params import free_port

pytestmark = [pytest.mark.browser, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def app_url(built_engine: EngineSpec, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    home = tmp_path / "lab"
    env = {
        **os.environ,
        "TUNING_LAB_HOME": str(home),
        "TUNING_LAB_DB": str(home / "lab.db"),
        "TUNING_LAB_LOCK": str(tmp_path / "runner.lock"),
    }
    with open(tmp_path / "streamlit.log", "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                "app.py",
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            healthy = wait_for(lambda: _answers_ok(url + "/_stcore/health"), timeout=60, poll=0.5)
            assert healthy, (tmp_path / "streamlit.log").read_text()
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
            _stop_runners(home / "lab.db")


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


def _answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.read() == b"ok")
    except OSError:
        return False


def _idle(page: object) -> None:
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']",  # type: ignore[attr-defined]
        timeout=60_000,
    )


def test_start_watch_compare_download(browser: Any, app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    shots = Path(os.environ.get("TUNING_LAB_SCREENSHOTS") or tmp_path / "shots")
    if not shots.is_absolute():
        shots = REPO / shots
    shots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page.goto(app_url + "/New_experiment")
    _idle(page)
    expect(page.get_by_text("Parameter to vary")).to_be_visible()
    # Defaults: max-num-seqs 2 vs 16; a small workload so the run stays short.
    requests = page.get_by_label("Requests", exact=True)
    requests.fill("48")
    requests.press("Enter")
    _idle(page)
    page.get_by_role("button", name="Start experiment").click()
    expect(page.get_by_text("started in its own process")).to_be_visible(timeout=30_000)

    page.goto(app_url + "/Live")
    _idle(page)
    progress = page.locator(".st-key-live_progress")
    expect(progress).to_be_visible(timeout=60_000)
    # Catch it under load for the README, then wait for the end.
    try:
        expect(page.get_by_text("loading").first).to_be_visible(timeout=240_000)
        page.wait_for_timeout(4000)
        page.screenshot(path=str(shots / "live.png"), full_page=True)
    except AssertionError:
        pass
    expect(page.get_by_text("is done. Final state below.")).to_be_visible(timeout=600_000)
    # No exception from the app itself (the server log tail on the page may quote vLLM's own).
    assert page.locator("[data-testid='stException']").count() == 0

    page.goto(app_url + "/Compare?experiment=1")
    _idle(page)
    button = page.locator(".st-key-dl_png_throughput button")
    expect(button).to_be_visible(timeout=60_000)
    expect(page.locator("[data-testid='stVegaLiteChart']").first).to_be_visible()
    assert page.locator("[data-testid='stException']").count() == 0
    page.screenshot(path=str(shots / "compare.png"), full_page=True)
    with page.expect_download(timeout=60_000) as info:
        button.click()
    download = info.value
    target = tmp_path / download.suggested_filename
    download.save_as(str(target))
    assert target.suffix == ".png"
    width, height = png_size(target.read_bytes())
    assert width > 100 and height > 100
