"""The rule for a missing part (tests/parts.py): `make test` fails the test, a developer's own run
skips it; and the tiny tokenizer is built for the session, never skipped for."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.parts import REQUIRE_ALL, every_part_required, missing, require_module
from tuning.engine.embedded import model_dir
from tuning.measure.traffic.workload import LocalTokenizer

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("value", "required"), [(None, False), ("", False), ("0", False), ("1", True), ("yes", True)]
)
def test_every_part_is_required_when_the_variable_is_set(value: str | None, required: bool) -> None:
    env = {} if value is None else {REQUIRE_ALL: value}
    assert every_part_required(env) is required


def test_a_missing_part_fails_under_make_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL, "1")
    with pytest.raises(pytest.fail.Exception, match=r"Ray is missing: run `make fleet`"):
        missing("Ray", "make fleet")
    with pytest.raises(pytest.fail.Exception, match=r"no_such_package_x.*`make fleet`"):
        require_module("no_such_package_x", "make fleet")


def test_a_missing_part_skips_a_developers_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REQUIRE_ALL, raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"Ray is not installed \(`make fleet`\)"):
        missing("Ray", "make fleet")
    with pytest.raises(pytest.skip.Exception, match="no_such_package_x"):
        require_module("no_such_package_x", "make fleet")


def test_a_present_module_is_returned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_ALL, "1")
    assert require_module("json", "nothing").dumps([1]) == "[1]"


def test_make_test_requires_every_part() -> None:
    """The rule only holds if `make test` sets the variable: the recipe that runs pytest does."""
    makefile = (REPO / "Makefile").read_text()
    recipe = re.search(r"^test:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe is not None, "no test target in the Makefile"
    assert f"{REQUIRE_ALL}=1 $(BIN)/pytest" in recipe.group(1)


def test_the_tiny_tokenizer_is_built_for_the_session(tiny_tokenizer: Path) -> None:
    """Built by the lab's recipe into the session's temp folder, whether or not the engine is."""
    assert not tiny_tokenizer.is_relative_to(model_dir())
    tok = LocalTokenizer(tiny_tokenizer)
    assert tok.decode(tok.encode("hello world")) == "hello world" and tok.usable_ids()


def test_the_labs_default_tokenizer_is_the_built_one(
    lab_tokenizer: Path, tiny_tokenizer: Path
) -> None:
    assert lab_tokenizer == model_dir() / "tokenizer.json"
    assert lab_tokenizer.read_bytes() == tiny_tokenizer.read_bytes()
