"""Compare's report button (AppTest): the report of the runs the page compares, built only when
clicked (History's deferred builder), named by the experiment; exports say what they are of."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.testing.v1 import AppTest

from tests.apptest import open_page, page_text
from tuning.present.report import build_report

Deferred = dict[str, tuple[Callable[[], Any], str | None]]


@pytest.fixture
def deferred(monkeypatch: pytest.MonkeyPatch) -> Deferred:
    """Every deferred download the page registers (file id -> (callable, file name)): AppTest's
    runtime, and the callables with it, is gone once the script has run."""
    seen: Deferred = {}
    original = MediaFileManager.add_deferred

    def spy(self: MediaFileManager, data: Any, mime: Any, coords: str, *a: Any, **kw: Any) -> str:
        file_id = original(self, data, mime, coords, *a, **kw)
        seen[file_id] = (data, kw.get("file_name", a[0] if a else None))
        return file_id

    monkeypatch.setattr(MediaFileManager, "add_deferred", spy)
    return seen


def _report(at: AppTest, deferred: Deferred) -> tuple[str, str]:
    """(file name, page) of Compare's report button, as a click would build it."""
    found = [b for b in at.get("download_button") if getattr(b, "key", None) == "dl_html_report"]
    assert found, "no report button on Compare"
    file_id = found[0].proto.deferred_file_id
    assert file_id and not found[0].proto.url  # built on click, not on every render
    make, name = deferred[file_id]
    data = make()
    assert isinstance(data, bytes)
    return str(name), data.decode("utf-8")


def _body(page: str) -> str:
    """The report without its generation time (the only part two builds differ in)."""
    return page.split("</header>", 1)[1]


def test_compare_has_a_report_of_the_experiment_compared(
    dashboard_lab: dict[str, Any], deferred: Deferred
) -> None:
    at = open_page("app_pages/4_Compare.py")
    exp = dashboard_lab["done_exp"]
    name, page = _report(at, deferred)
    assert name == f"report-exp{exp}.html"
    expected = build_report(dashboard_lab["db"], experiment_ids=[exp])
    assert _body(page) == _body(expected)
    assert 'data-card="model"' in page and ">tiny<" in page
    text = page_text(at)  # the page says once what the charts (and their files) are of
    assert "model tiny" in text and "vLLM 0.32.0" in text
    assert "input 64 / output 16 tokens, concurrency 8, 24 requests" in text


def test_compare_report_follows_the_sides_picked(
    dashboard_lab: dict[str, Any], deferred: Deferred
) -> None:
    exp = dashboard_lab["done_exp"]
    runs = dashboard_lab["runs"]
    at = open_page("app_pages/4_Compare.py")
    base, cand = [runs[1], runs[4]], [runs[0], runs[3]]  # 16 as the baseline, against 2
    at.multiselect(key=f"cmp_baseline_exp{exp}").set_value(base).run()
    at.multiselect(key=f"cmp_candidates_exp{exp}").set_value(cand).run()
    assert not at.exception, at.exception
    ids = [r for r in runs if r in set(base + cand)]
    name, page = _report(at, deferred)
    assert name == "report-runs-" + "-".join(map(str, ids)) + ".html"
    expected = build_report(dashboard_lab["db"], run_ids=ids, baseline_ids=base)
    assert _body(page) == _body(expected)
    assert "vs max-num-seqs = 16</h3>" in page  # the baseline picked on the page
