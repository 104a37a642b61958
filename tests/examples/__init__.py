"""Tests of the GPU evidence committed under examples/h200."""

from __future__ import annotations

import tarfile
from pathlib import Path

H200 = Path(__file__).resolve().parents[2] / "examples" / "h200"


def server_logs(name: str) -> list[str]:
    """The text of every server log in one of examples/h200's `*-server-logs.tar.gz`."""
    with tarfile.open(H200 / name) as tar:
        files = [tar.extractfile(m) for m in tar.getmembers() if m.isfile()]
        return [f.read().decode("utf-8", "replace") for f in files if f is not None]
