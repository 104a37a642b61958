"""`team` prints what teammates' files are called without their terminal escapes: a bundle named
with a colour/retitle sequence is listed, imported and refused with the sequence made visible."""

from __future__ import annotations

from typing import Any

import pytest

from store.bundle import SUFFIX
from tests.fakes.hostile import TERM_ESCAPE
from tuning.cli.args import printable
from tuning.cli.main import main as cli_main

RAW = ("\x1b", "\x07", "\u202e")


def test_printable_shows_controls_and_keeps_text() -> None:
    assert printable(TERM_ESCAPE) == "\\x1b[31mred\\x1b]0;title\\x07\\x1b[0m"
    assert printable("a\u202eb\u2028c\nd") == "a\\u202eb\\u2028c\\nd"
    assert printable("bob-box_b-été 1.bundle.zip") == "bob-box_b-été 1.bundle.zip"


def test_team_prints_file_names_without_terminal_escapes(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", str(team["folder"]))
    good = team["publish_bob"]()
    hostile = good.with_name(f"bob{TERM_ESCAPE}\u202e{SUFFIX}")
    good.rename(hostile)
    (team["folder"] / f"junk{TERM_ESCAPE}{SUFFIX}").write_bytes(b"not a zip")

    assert cli_main(["team", "--db", str(team["ada"])]) == 0
    listed = capsys.readouterr()
    assert printable(hostile.name) in listed.out and "junk\\x1b[31mred" in listed.out
    assert cli_main(["team", "--db", str(team["ada"]), "--import-new"]) == 0  # junk skipped
    imported = capsys.readouterr()
    assert f"imported {printable(hostile.name)}" in imported.out
    for text in (listed.out, listed.err, imported.out, imported.err):
        assert not any(ch in text for ch in RAW), text
