"""Issue 38 item 4 on New experiment: a checkbox, on by default, stores the same choice the CLI's
`--resident` does (auto: resident engines where allowed, the runner says why not once; off: every
run restarts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import connect, queries
from tests.apptest import open_page


@pytest.mark.parametrize(("checked", "asked"), [(True, "auto"), (False, "off")])
def test_the_checkbox_stores_the_resident_choice(
    spawned: list[int], lab_home: Path, checked: bool, asked: str
) -> None:
    at = open_page("app_pages/1_New_experiment.py")
    box = at.checkbox(key="new_resident")
    assert box.value is True and not box.disabled  # max-num-seqs restarts the server
    box.set_value(checked).run()
    at.button(key="new_start").click().run()
    assert not at.exception, at.exception
    with connect(lab_home / "lab.db") as db:
        exp = queries.get_experiment(db, spawned[0])
    assert exp["resident"] == {"asked": asked}
