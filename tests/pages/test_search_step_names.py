"""A search's (or a plan's) step experiments are stored as `search <10-hex key>: max-num-seqs =
32`: the key is how the search finds its steps. The pages showed that key (the experiment pickers
of Runs, Compare, Live and History, History's table and sharing picker, Home's latest decision,
the report's heading); they show the search's id instead (`search 1: max-num-seqs = 32`), and the
stored name, the identity, is as it was (AppTest; the report from tuning.present.report)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store import connect, queries
from tests.apptest import open_page, page_text
from tests.factories import add_experiment, add_plan, add_run
from tests.factories_search import add_search
from tuning.present.report import build_report

KEY = re.compile(r"\b(search|plan) [0-9a-f]{10}:")


@pytest.fixture
def step_lab(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A recorded search of three steps (search 1), and a plan's confirm round of two values
    (plan 1, the newest experiment: Home's latest decision)."""
    path = lab_home / "lab.db"
    monkeypatch.setenv("TUNING_LAB_DB", str(path))
    found = add_search(path, budget_runs=3)
    add_plan(path)
    with connect(path) as db:
        plan_key = queries.list_plans(db)[0]["key"]
        exp = add_experiment(db, values=[16, 32], name=f"plan {plan_key}: confirm round 1 rival")
        rng = np.random.default_rng(5)
        for seq, value in enumerate((16, 32, 16, 32)):
            add_run(db, exp, seq=seq, value=value, rng=rng, repeat=seq // 2)
        stored = [str(e["name"]) for e in queries.list_experiments(db, True)]
    assert sum(bool(KEY.match(n)) for n in stored) == 4  # the stored names carry the keys
    return {"db": path, "search_id": found["search_id"], "stored": stored, "confirm": exp}


def _options(at: Any, key: str) -> str:
    return "\n".join(map(str, at.selectbox(key=key).options))


def test_pickers_and_tables_name_a_step_by_its_search(step_lab: dict[str, Any]) -> None:
    sid = step_lab["search_id"]
    for page, key in (
        ("app_pages/2_Runs.py", "runs_experiment"),
        ("app_pages/4_Compare.py", "cmp_experiment"),
        ("app_pages/3_Live.py", "live_experiment"),
        ("app_pages/5_History.py", "hist_edit_experiment"),
    ):
        at = open_page(page)
        shown = _options(at, key)
        assert f"search {sid}: max-num-seqs = " in shown, (page, shown)
        assert "plan 1: confirm round 1 rival" in shown, (page, shown)
        if key == "hist_edit_experiment":  # History's sharing picker too
            shown += "\n".join(map(str, at.multiselect(key="share_experiments").options))
        assert not KEY.search(shown + page_text(at)), (page, KEY.findall(shown + page_text(at)))
    with connect(step_lab["db"], readonly=True) as db:  # the identity is as stored
        assert [str(e["name"]) for e in queries.list_experiments(db, True)] == step_lab["stored"]


def test_home_and_the_report_name_a_step_by_its_search(step_lab: dict[str, Any]) -> None:
    at = open_page(None)
    latest = page_text(at)
    assert f"experiment {step_lab['confirm']}: plan 1: confirm round 1 rival" in latest
    assert not KEY.search(latest), KEY.findall(latest)
    step = min(e for e in range(1, step_lab["confirm"]))  # the search's first step
    page = build_report(step_lab["db"], experiment_ids=[step])
    assert f"Experiment {step}: search {step_lab['search_id']}: max-num-seqs = " in page
    assert not KEY.search(page), KEY.findall(page)
