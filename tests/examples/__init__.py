"""Tests of the GPU evidence committed under examples/h200."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import pytest

from store import snapshot

H200 = Path(__file__).resolve().parents[2] / "examples" / "h200"


def server_logs(name: str) -> list[str]:
    """The text of every server log in one of examples/h200's `*-server-logs.tar.gz`."""
    with tarfile.open(H200 / name) as tar:
        files = [tar.extractfile(m) for m in tar.getmembers() if m.isfile()]
        return [f.read().decode("utf-8", "replace") for f in files if f is not None]


def lab_of(example: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A writable copy of a committed example DB as this test's lab (the app opens DBs
    writable: never the original)."""
    copy = tmp_path / "lab.db"
    shutil.copy(snapshot.expanded(example), copy)
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path))
    monkeypatch.setenv("TUNING_LAB_DB", str(copy))
    return copy
