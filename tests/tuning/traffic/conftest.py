"""Fixtures for the traffic tests: the embedded engine's tokenizer (skip when it is not built)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.measure.traffic.workload import LocalTokenizer


@pytest.fixture(scope="session")
def tok(tiny_tokenizer: Path) -> LocalTokenizer:
    return LocalTokenizer(tiny_tokenizer)
