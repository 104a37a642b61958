"""docs/reference/architecture.md is generated from the code (tools/architecture.py): these tests
fail when the committed page is stale or misses a package or module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import architecture
from tools.architecture import PAGE, REGENERATE, missing, modules, name, purpose, render

STALE = f"docs/reference/architecture.md is stale: regenerate it with {REGENERATE} and commit it"


def test_the_committed_page_is_what_the_code_generates() -> None:
    assert PAGE.read_text() == render(), STALE


def test_every_package_and_module_is_on_the_page() -> None:
    found = [name(p) for layer in architecture.LAYERS for p in modules(layer)]
    assert {
        "core/records.py",
        "store/schema.py",
        "tuning/cli/main.py",
        "ui/",
        "app_pages/2_Runs.py",
    } <= set(found)
    assert missing(PAGE.read_text()) == [], STALE


def test_the_check_catches_a_module_missing_from_the_page() -> None:
    page = PAGE.read_text()
    row = next(line for line in page.splitlines() if line.startswith("| `store/schema.py` |"))
    assert missing(page.replace(row + "\n", "")) == ["store/schema.py"]


def test_a_new_module_makes_the_page_stale_and_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module added to a layer is listed with its docstring, and the committed page misses it."""
    for layer in architecture.LAYERS:
        (tmp_path / layer).mkdir()
    (tmp_path / "app.py").write_text('"""The entry."""\n')
    (tmp_path / "store" / "__init__.py").write_text('"""All SQL."""\n')
    (tmp_path / "store" / "m010_planted.py").write_text(
        '"""A planted migration. Second sentence, not shown."""\n'
    )
    monkeypatch.setattr(architecture, "REPO", tmp_path)
    page = render()
    assert "| `store/m010_planted.py` | A planted migration. |" in page
    assert missing(PAGE.read_text()) == ["store/m010_planted.py"]
    assert PAGE.read_text() != page


def test_the_purpose_is_the_docstrings_first_sentence_on_one_line(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""One purpose, wrapped\nover two lines. The rest.\n\nMore."""\n')
    assert purpose(module) == "One purpose, wrapped over two lines."
    module.write_text("x = 1\n")
    assert purpose(module) == "(no docstring)"
