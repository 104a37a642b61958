"""Issue 38, item 4 in the HTML report: where each experiment's time went, with what its repeats
did about resident engines (switches, starts, the check with its numbers, a fall back and its
reason), as `compare` and the Compare page say it; the decision carries the note that the
experiment fell back."""

from __future__ import annotations

from pathlib import Path

from store import connect
from tests.factories import FELL_BACK, give_resident, seed_lab
from tuning.present.report import build_report


def test_the_report_says_what_resident_engines_did(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    ids = seed_lab(path, values=(2, 16), repeats=3, with_failed=False, with_secrets=False)
    with connect(path) as db:
        give_resident(db, ids["experiment_id"])
    page = build_report(path, experiment_ids=[ids["experiment_id"]], kinds=())
    section = page[page.index('<section id="time-spent">') :]
    section = section[: section.index("</section>")]
    assert "resident engines: 4 switches, 2 starts (a switch: " in section
    assert "resident check: undecided (too few runs a side to say yet): value " in section
    assert "value 2: 1 restarted, 2 switched; output throughput " in section  # its numbers
    assert f"resident engines fell back to restarts: {FELL_BACK}" in section
    headline = page[page.index('<section id="headline">') :]
    headline = headline[: headline.index("</section>")]
    assert '<p class="headline-note warn">Note: resident engines fell back to restarts' in headline


def test_a_report_of_runs_never_resident_has_no_such_section(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    ids = seed_lab(path, values=(2, 16), repeats=2, with_failed=False, with_secrets=False)
    page = build_report(path, experiment_ids=[ids["experiment_id"]], kinds=())
    assert 'id="time-spent"' not in page and "headline-note" not in page
