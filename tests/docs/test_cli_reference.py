"""docs/reference/cli.md is generated from the lab's parser (tools/cli_reference.py): these tests
fail when the committed page is stale or a command or flag is missing from it."""

from __future__ import annotations

import argparse

from tools.cli_reference import PAGE, REGENERATE, lab_parser, render, undocumented

STALE = f"docs/reference/cli.md is stale: regenerate it with {REGENERATE} and commit it"


def _subparser(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_the_committed_page_is_what_the_parser_generates() -> None:
    assert PAGE.read_text() == render(lab_parser()), STALE


def test_every_command_and_flag_is_documented() -> None:
    missing = undocumented(lab_parser(), PAGE.read_text())
    assert missing == [], f"undocumented: {missing}; {STALE}"


def test_the_page_names_every_top_level_command() -> None:
    page = PAGE.read_text()
    parser = lab_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert len(top.choices) >= 20
    for name in top.choices:
        assert f"## `tuning-lab {name}`" in page


def test_the_check_catches_a_planted_undocumented_flag() -> None:
    parser = lab_parser()
    _subparser(parser, "bench").add_argument("--planted-flag", help="not on the page")
    _subparser(parser, "workload", "save").add_argument("--planted-too", type=int, default=3)
    assert undocumented(parser, PAGE.read_text()) == [
        "tuning-lab bench --planted-flag",
        "tuning-lab workload save --planted-too",
    ]
    assert PAGE.read_text() != render(parser)  # and the page reads as stale


def test_the_check_catches_a_planted_undocumented_command() -> None:
    parser = lab_parser()
    top = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    planted = top.add_parser("planted", help="a command nobody documented")
    planted.add_argument("--depth", type=int, default=1)
    assert undocumented(parser, PAGE.read_text()) == ["tuning-lab planted"]


def test_a_flag_documented_under_another_command_does_not_count() -> None:
    """`--json` appears under many commands; a command's own section must name its flag."""
    parser = lab_parser()
    _subparser(parser, "demo").add_argument("--json", action="store_true")
    page = PAGE.read_text()
    assert "`--json`" in page
    assert "tuning-lab demo --json" in undocumented(parser, page)
