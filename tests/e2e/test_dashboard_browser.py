"""A real browser (Debian's chromium through Playwright) against `streamlit run app.py`: start an
experiment on the embedded engine, watch the live page reach completion, open the compare page and
download a PNG. With TUNING_LAB_SCREENSHOTS=DIR (`make screenshots`) the README's screenshots are
written there."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import engine_available
from tuning.params import free_port

pytestmark = [pytest.mark.browser, pytest.mark.engine]
REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture
def app_url(tmp_path: Path) -> Iterator[str]:
    if not engine_available():
        if os.environ.get("TUNING_LAB_REQUIRE_ENGINE"):
            pytest.fail("the embedded engine is not built: run `make setup`")
        pytest.skip("embedded engine not built")
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: `make browser` installs it")
    port = free_port()
    home = tmp_path / "lab"
    env = {
        **os.environ,
        "TUNING_LAB_HOME": str(home),
        "TUNING_LAB_DB": str(home / "lab.db"),
        "TUNING_LAB_LOCK": str(tmp_path / "runner.lock"),
    }
    log = open(tmp_path / "streamlit.log", "wb")
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
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as resp:
                    if resp.read() == b"ok":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (tmp_path / "streamlit.log").read_text()
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
        log.close()
        # The runner process the page started has its own session; stop it if it is still there.
        from store import open_db, queries
        from tuning.experiment.supervisor import reap_stale

        if (home / "lab.db").exists():
            for exp in queries.active_experiments(open_db(home / "lab.db")):
                if exp.get("runner_pid"):
                    try:
                        os.killpg(int(exp["runner_pid"]), signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            reap_stale(home / "lab.db")


def _idle(page: object) -> None:
    page.wait_for_selector(
        "[data-testid='stApp'][data-test-script-state='notRunning']",  # type: ignore[attr-defined]
        timeout=60_000,
    )


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_start_watch_compare_download(app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    shots = Path(os.environ.get("TUNING_LAB_SCREENSHOTS") or tmp_path / "shots")
    if not shots.is_absolute():
        shots = REPO / shots
    shots.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
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
        width, height = _png_size(target.read_bytes())
        assert width > 100 and height > 100
        browser.close()
