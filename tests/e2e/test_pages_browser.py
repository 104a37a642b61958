"""Every page in a real browser (Debian's chromium through Playwright) on a lab of real runs (the
committed H200 snapshot, so no engine is started): no exception, no emoji in what a page shows,
and every verdict of the Compare table drawn within its column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.pages import check_every_page
from tools.browser import REPO, serve_app
from tools.screenshots import copy_db, latest_experiment

pytestmark = pytest.mark.browser
SNAPSHOT = REPO / "examples" / "h200" / "lab-h200.db.xz"


def test_every_page_of_a_real_lab(browser: Any, tmp_path: Path) -> None:
    home = tmp_path / "lab"
    copy_db(SNAPSHOT, home / "lab.db")
    exp_id = latest_experiment(home / "lab.db")
    errors: list[str] = []
    with serve_app(home, tmp_path / "streamlit.log") as url:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        assert check_every_page(page, url, home / "lab.db", exp_id) >= 10
    assert errors == [], errors[:3]
