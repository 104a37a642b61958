"""Exit codes are one table for every command (0 done, 1 failed or refused, 2 usage, 130
interrupted; 141 a closed pipe): no help text, command line or epilog names another code (`engine
detect` said "3 use the embedded engine"), and a search or plan refused because the runner is busy
exits 1 like every refusal (it exited 3)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from tuning.cli.args import EXIT_CODES
from tuning.cli.helps import _walk
from tuning.cli.main import build_parser
from tuning.cli.search_show import drive
from tuning.experiment.lock import RunnerBusy

ALLOWED = {code for code, _ in EXIT_CODES} | {141}
# "exit 3", "exits 0", "exit code 3", "exit 0 use it, 3 use ..." (each number of the list)
EXIT_TEXT = re.compile(r"\bexit(?:s|ing)?(?: codes?)?:?\s+((?:\d+[^.;)]*?)+)(?:[.;)]|$)")


def texts(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str]]:
    """(where, text) of every description, epilog, command line and flag help of the CLI."""
    for path, sub in _walk(parser):
        where = " ".join(path) or "(top)"
        for text in (sub.description, sub.epilog):
            if text:
                yield where, text
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    yield f"{where} {choice.dest}", choice.help or ""
            elif action.help and action.help is not argparse.SUPPRESS:
                yield f"{where} {'/'.join(action.option_strings) or action.dest}", action.help


def stale_codes(text: str) -> list[int]:
    """The exit codes text names that are not in the table."""
    found = []
    for m in EXIT_TEXT.finditer(" ".join(text.split())):
        found += [int(n) for n in re.findall(r"(?<![\w.])(\d+)(?![\w.%])", m.group(1))]
    return [n for n in found if n not in ALLOWED]


def test_no_help_text_names_an_exit_code_outside_the_table() -> None:
    stale = [(where, text) for where, text in texts(build_parser()) if stale_codes(text)]
    assert stale == []


@pytest.mark.parametrize(
    "text",
    [
        "find your vLLM: exit 0 use it, 3 use the embedded engine, 1 the saved one is gone",
        "exits 4 when the lock is held",
        "exit code 3 means busy",
    ],
)
def test_the_check_catches_a_code_outside_the_table(text: str) -> None:
    assert stale_codes(text)


def test_the_table_itself_passes() -> None:
    text = "exit codes: 0 done, 1 failed or refused, 2 usage error, 130 interrupted."
    assert stale_codes(text) == []


def test_a_busy_runner_refuses_a_search_with_1(capsys: pytest.CaptureFixture[str]) -> None:
    def busy() -> dict[str, object]:
        raise RunnerBusy("experiment 4 holds this machine's runner")

    assert drive(busy) == (1, {})
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["refused: experiment 4 holds this machine's runner"]
