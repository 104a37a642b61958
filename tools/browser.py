"""The app in a real browser, shared by the browser tests (tests/e2e) and `make screenshots`: the
app as `make run` starts it (`python -m ui.serve app.py`, its host check on) on a lab home of its
own, and Debian's chromium through Playwright (Playwright's own download fails here)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tuning.engine.launch import free_port

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The app is idle: its script has run to the end (a fragment that polls keeps it "running" briefly).
IDLE = "[data-testid='stApp'][data-test-script-state='notRunning']"


def answers_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.read() == b"ok")
    except OSError:
        return False


def lab_env(home: Path) -> dict[str, str]:
    """The environment of an app (and of the runners it starts) on the lab in `home`."""
    return {
        **os.environ,
        "TUNING_LAB_HOME": str(home),
        "TUNING_LAB_DB": str(home / "lab.db"),
        "TUNING_LAB_LOCK": str(home / "runner.lock"),
    }


@contextmanager
def serve_app(home: Path, log_path: Path, *, start_timeout: float = 90.0) -> Iterator[str]:
    """The app (as `make run` starts it) on the lab in `home` (its DB is home/lab.db); yields its
    URL and stops its process group afterwards."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [  # as `make run` starts it: through the launcher, with its host check
        sys.executable,
        "-m",
        "ui.serve",
        "app.py",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]
    url = f"http://127.0.0.1:{port}"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            cwd=REPO,
            env=lab_env(home),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + start_timeout
            while not answers_ok(url + "/_stcore/health"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not start: {log_path.read_text()[-2000:]}")
                time.sleep(0.5)
            yield url
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)


@contextmanager
def chromium() -> Iterator[Any]:
    """Debian's chromium, headless, closed on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            browser.close()


def wait_idle(page: Any, timeout_ms: int = 60_000) -> None:
    """Wait until the page's script has run to its end."""
    page.wait_for_selector(IDLE, timeout=timeout_ms)


def pick_option(page: Any, box: Any, option: Any, tries: int = 4) -> None:
    """Open the Streamlit selectbox `box` and click `option` (a role=option locator). A click that
    lands while Streamlit re-renders the box is lost: a fresh clone's `make test` waited 30 s for
    a list that never opened. So: open, wait a few seconds for the option, else close and again."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(tries):
        wait_idle(page)
        box.click()
        try:
            option.wait_for(state="visible", timeout=5_000)
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
            continue
        option.click()
        return
    raise AssertionError(f"the selectbox never offered {option} in {tries} tries")
