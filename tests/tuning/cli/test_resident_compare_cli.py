"""Issue 38, item 4 in `compare`: per experiment, whether its repeats switched resident servers
(switches, starts), the stored check with its numbers and a fall back with its reason, in the text
and in `--json`; the verdict's note says the experiment fell back (its runs were served both
ways)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import connect
from tests.factories import FELL_BACK, give_resident, seed_lab
from tuning.cli.main import main as cli_main


def _lab(tmp_path: Path, fallback: str | None) -> tuple[str, str, dict[str, Any]]:
    path = tmp_path / "lab.db"
    ids = seed_lab(path, values=(2, 16), repeats=3, with_failed=False, with_secrets=False)
    with connect(path) as db:
        state = give_resident(db, ids["experiment_id"], fallback)
    return str(path), str(ids["experiment_id"]), state


def test_compare_says_the_switches_the_check_and_the_fall_back(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, exp, state = _lab(tmp_path, FELL_BACK)
    assert cli_main(["compare", "--db", db, "--experiment", exp]) == 0
    out = capsys.readouterr().out
    assert "resident engines: 4 switches, 2 starts (a switch: " in out
    verdict = state["check"]["verdict"]
    assert f"resident check: {verdict} (" in out
    assert "value 2: 1 restarted, 2 switched; output throughput " in out  # with its numbers
    assert f"resident engines fell back to restarts: {FELL_BACK}" in out
    note = f"Note: resident engines fell back to restarts ({FELL_BACK}); 4 of its runs"
    head = out[: out.index("Baseline:")]  # the verdict, before any table, carries the note
    assert note in head
    assert cli_main(["compare", "--db", db, "--experiment", exp, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    resident = data["time_spent"][0]["resident"]
    assert (resident["switches"], resident["starts"]) == (4, 2)
    assert resident["fallback"] == FELL_BACK and resident["check"]["verdict"] == verdict
    assert resident["check"]["values"]["2"]["metrics"]["output_throughput"]["switched"]
    assert any(n.startswith(note) for n in data["decision"]["notes"])


def test_an_experiment_that_did_not_fall_back_has_no_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, exp, state = _lab(tmp_path, None)
    assert state["check"]["verdict"] == "undecided"  # seeded runs: one restarted a value
    assert cli_main(["compare", "--db", db, "--experiment", exp]) == 0
    out = capsys.readouterr().out
    assert "resident engines: 4 switches, 2 starts" in out
    assert "fell back" not in out and "Note: " not in out
