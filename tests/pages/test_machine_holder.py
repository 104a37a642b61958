"""Issue 23 item 9 from the UI (AppTest): while another lab's experiment holds this machine's
runner lock, Home, Live and New experiment name it in the same words (experiment, name, DB file,
pid); Home offers no demo and New experiment no Start, and with the lock free none says it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.records import NewExperiment
from store import connect, open_db, repo
from tests.apptest import open_page, page_text
from tests.fakes.engines import fake_settings_env
from tuning.experiment.lock import machine_lock
from ui.common import md_escape

PAGES = (None, "app_pages/3_Live.py", "app_pages/1_New_experiment.py")
HEAD = "Running on this machine: "


def _holder_lines(at: AppTest) -> list[str]:
    infos = [str(i.value) for i in at.info if str(i.value).startswith(HEAD)]
    return [text.split(". ")[0].removesuffix(".") for text in infos]


@pytest.fixture
def labs(lab_home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, int]:
    for name, value in fake_settings_env(lab_home).items():
        monkeypatch.setenv(name, value)
    here = lab_home / "lab.db"
    open_db(here).conn.close()
    other = (lab_home.parent / "cli-run" / "lab.db").resolve()
    with connect(other) as db:
        exp = repo.create_experiment(
            db, NewExperiment(param="max-num-seqs"), name="kv sweep", status="running"
        )
    return here, other, exp


def test_another_labs_experiment_is_named_the_same_way_on_every_page(
    labs: tuple[Path, Path, int],
) -> None:
    _, other, exp = labs
    expected = md_escape(f"{HEAD}experiment {exp} 'kv sweep' in {other}, pid {os.getpid()}")
    with machine_lock(holder={"db": str(other), "experiment": exp}):
        shown = {page or "Home": _holder_lines(open_page(page)) for page in PAGES}
        home, new = open_page(None), open_page("app_pages/1_New_experiment.py")
    print(shown)
    assert shown == {page or "Home": [expected] for page in PAGES}
    assert "No experiment is running" not in page_text(home) and not home.button  # no demo
    assert new.button(key="new_start").disabled
    free = {page or "Home": _holder_lines(open_page(page)) for page in PAGES}
    assert free == {page or "Home": [] for page in PAGES}
    assert not open_page("app_pages/1_New_experiment.py").button(key="new_start").disabled
