"""A real browser (Debian's chromium through Playwright) against the app as `make run` serves it:
start an experiment on the embedded engine, watch the live page reach completion, open the compare
page and download a PNG. (The README's screenshots come from `make screenshots`:
tools/screenshots.py.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.checks import png_size
from tests.e2e.pages import fixed_runs
from tools.browser import wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.engine]


def test_start_watch_compare_download(browser: Any, app_url: str, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page.goto(app_url + "/New_experiment")
    wait_idle(page)
    expect(page.get_by_text("Parameter to vary")).to_be_visible()
    # Defaults: max-num-seqs 2 vs 16; a small workload so the run stays short.
    requests = page.get_by_label("Requests", exact=True)
    requests.fill("48")
    requests.press("Enter")
    wait_idle(page)
    fixed_runs(page, 1)
    page.get_by_role("button", name="Start experiment").click()
    expect(page.get_by_text("started in its own process")).to_be_visible(timeout=30_000)

    page.goto(app_url + "/Live")
    wait_idle(page)
    progress = page.locator(".st-key-live_progress")
    expect(progress).to_be_visible(timeout=60_000)
    expect(page.get_by_text("is done. Final state below.")).to_be_visible(timeout=600_000)
    # No exception from the app itself (the server log tail on the page may quote vLLM's own).
    assert page.locator("[data-testid='stException']").count() == 0

    page.goto(app_url + "/Compare?experiment=1")
    wait_idle(page)
    button = page.locator(".st-key-dl_png_throughput button")
    expect(button).to_be_visible(timeout=60_000)
    expect(page.locator("[data-testid='stVegaLiteChart']").first).to_be_visible()
    assert page.locator("[data-testid='stException']").count() == 0
    with page.expect_download(timeout=60_000) as info:
        button.click()
    download = info.value
    target = tmp_path / download.suggested_filename
    download.save_as(str(target))
    assert target.suffix == ".png"
    width, height = png_size(target.read_bytes())
    assert width > 100 and height > 100
