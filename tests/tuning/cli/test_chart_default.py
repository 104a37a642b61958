"""`chart` without `--kind` draws the throughput comparison, says so, and writes a valid PNG."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from tuning.cli.main import main as cli_main

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_chart_without_kind_draws_throughput(
    charts_lab: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(charts_lab["path"])
    exp = str(charts_lab["exp"])
    plain, explicit = tmp_path / "x.png", tmp_path / "throughput.png"
    assert cli_main(["chart", "--db", db, "--experiment", exp, "--out", str(plain)]) == 0
    said = capsys.readouterr()
    assert "drawing the throughput comparison" in said.err and f"wrote {plain}" in said.out
    data = plain.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100
    args = ["chart", "--db", db, "--experiment", exp, "--kind", "throughput"]
    assert cli_main([*args, "--out", str(explicit)]) == 0
    assert "drawing the" not in capsys.readouterr().err
    assert explicit.read_bytes() == data
