"""Start an experiment from the page (AppTest), let the runner process do it, see the runs
listed."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import open_db, queries
from tests.apptest import open_page
from tests.checks import wait_for

pytestmark = pytest.mark.engine
REPO = Path(__file__).resolve().parents[2]


def test_start_from_page_and_see_runs(
    engine: object, lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_path = lab_home / "lab.db"
    monkeypatch.setenv("TUNING_LAB_DB", str(db_path))
    monkeypatch.chdir(REPO)
    at = open_page("app_pages/1_New_experiment.py")
    at.selectbox(key="new_param").select("concurrency").run()
    at.text_input(key="new_values").input("1,4").run()
    at.number_input(key="new_requests").set_value(8).run()
    at.number_input(key="new_input").set_value(32).run()
    at.number_input(key="new_output").set_value(16).run()
    # one run a value: this test is about the page starting a runner, not about deciding
    at.radio(key="new_repeat_mode").set_value("fixed").run()
    at.number_input(key="new_repeats").set_value(1).run()
    assert not at.error, [e.value for e in at.error]
    at.button(key="new_start").click().run()
    assert not at.exception
    assert any("started" in s.value for s in at.success), [s.value for s in at.success]
    db = open_db(db_path)
    exp = queries.list_experiments(db)[0]
    assert wait_for(
        lambda: queries.get_experiment(db, exp["id"])["status"] not in ("queued", "running"),
        timeout=600,
        poll=2,
    ), "experiment did not finish in time"
    final = queries.get_experiment(db, exp["id"])
    assert final["status"] == "done", final
    runs = queries.list_runs(db, exp["id"])
    assert [r["value"] for r in runs] == ["1", "4"] and all(r["status"] == "done" for r in runs)
    # Only one server start for a workload parameter: the second run reused it.
    assert runs[1]["startup"]["reused_server"] is True
    at.switch_page("app_pages/2_Runs.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    assert list(table["id"]) == [r["id"] for r in reversed(runs)] or sorted(table["id"]) == sorted(
        r["id"] for r in runs
    )
    assert set(table["status"]) == {"done"}
