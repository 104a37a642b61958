"""Fixtures for the traffic tests: the embedded engine's tokenizer (skip when it is not built)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.workload import LocalTokenizer

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / ".engine" / "tiny-llama" / "tokenizer.json"


@pytest.fixture(scope="session")
def tok() -> LocalTokenizer:
    if not TINY.exists():
        pytest.skip("embedded tokenizer not built")
    return LocalTokenizer(TINY)
