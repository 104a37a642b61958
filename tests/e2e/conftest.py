"""A real browser for the browser tier: Debian's chromium through Playwright (Playwright's own
download fails on these machines), one per test, so no Playwright instance outlives its test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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


@pytest.fixture
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        if os.environ.get("TUNING_LAB_REQUIRE_ENGINE"):
            pytest.fail("chromium is missing: run `make browser`")
        pytest.skip("Debian chromium not installed (make browser)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield chromium
        finally:
            chromium.close()
