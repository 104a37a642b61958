"""The user's name for the CLI is `tuning-lab` (issue 40 item 2): no user page (nor the README)
shows a command as `python -m tuning ...`. The module form may be named only where a page says it
is the same program; docs/contributing.md (for people who work on the lab) and the architecture
page (the code's modules, generated from their docstrings: `tuning/__main__.py` is `python -m
tuning`) may use it. `python -m tuning.cli.bench` and other module paths are not the command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
BUILDERS = {DOCS / "contributing.md", DOCS / "reference" / "architecture.md"}
MODULE_FORM = re.compile(r"python3? -m tuning(?![.\w])")
SAME_PROGRAM = re.compile(r"same\s+program", re.IGNORECASE)
AROUND = 160  # characters either side where "the same program" must be said


def module_commands(text: str) -> list[str]:
    """Each `python -m tuning` in text that is not beside "the same program", with its line."""
    found = []
    for m in MODULE_FORM.finditer(text):
        near = text[max(0, m.start() - AROUND) : m.end() + AROUND]
        if not SAME_PROGRAM.search(near):
            line = text.count("\n", 0, m.start()) + 1
            found.append(f"line {line}: {text.splitlines()[line - 1].strip()[:120]}")
    return found


def user_pages() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if p not in BUILDERS)
    return [REPO / "README.md", *pages]


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_a_user_page_says_tuning_lab(page: Path) -> None:
    assert module_commands(page.read_text(encoding="utf-8")) == []


def test_the_pages_are_there() -> None:
    names = {p.relative_to(REPO).as_posix() for p in user_pages()}
    assert {"README.md", "docs/guides/workloads.md", "docs/reference/cli.md"} <= names


@pytest.mark.parametrize(
    "planted",
    [
        "run `python -m tuning compare --db lab.db --experiment 1`",
        "$ .venv/bin/python -m tuning workload preview --spec s.json",
        "python3 -m tuning search show 2",
    ],
)
def test_the_check_catches_a_module_command(planted: str) -> None:
    assert module_commands(f"A page.\n\n{planted}\n")


@pytest.mark.parametrize(
    "fine",
    [
        "`tuning-lab ...` is the same program as `.venv/bin/python -m tuning ...`",
        "`python -m tuning.cli.bench` runs bench alone",
        "tuning-lab compare --db lab.db",
    ],
)
def test_the_check_lets_the_rest_through(fine: str) -> None:
    assert module_commands(fine) == []
