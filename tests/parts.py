"""A part of the lab a test needs (the embedded engine, chromium, Ray) that is not installed: under
`make test`, which sets TUNING_LAB_REQUIRE_ALL=1, the test fails, so a broken install can never
pass green; only a developer's own runs (the fast tier, one file) skip it."""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_ALL = "TUNING_LAB_REQUIRE_ALL"


def every_part_required(environ: Mapping[str, str] | None = None) -> bool:
    """True under `make test`: TUNING_LAB_REQUIRE_ALL set to anything but empty or 0."""
    env = os.environ if environ is None else environ
    return env.get(REQUIRE_ALL, "").strip() not in ("", "0")


def missing(part: str, fix: str) -> NoReturn:
    """Fail (under `make test`) or skip (a developer's run) a test whose `part` is missing."""
    if every_part_required():
        pytest.fail(f"{part} is missing: run `{fix}` ({REQUIRE_ALL} is set)", pytrace=False)
    pytest.skip(f"{part} is not installed (`{fix}`)")


def require_module(name: str, fix: str) -> ModuleType:
    """`import name`, or `missing()`: pytest.importorskip that fails under `make test`."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"the Python package {name} ({exc})", fix)
