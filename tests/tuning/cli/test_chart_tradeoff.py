"""`chart --kind pareto|search` from the CLI: valid PNG / HTML files, the front named on stdout,
and refusals for a search that does not exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.checks import png_size
from tuning.cli.main import main as cli_main


def test_pareto_and_search_charts_from_the_cli(
    charts_lab: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, exp = str(charts_lab["path"]), str(charts_lab["exp"])
    front = tmp_path / "front.png"
    args = ["chart", "--db", db, "--experiment", exp, "--kind", "pareto", "--out", str(front)]
    assert cli_main(args) == 0
    said = capsys.readouterr().out
    assert f"wrote {front}" in said and "non-dominated: runs " in said
    assert png_size(front.read_bytes())[0] > 300
    fingerprint = charts_lab["runs"][0]["workload_fingerprint"]
    page = tmp_path / "per_user.html"
    args = ["chart", "--db", db, "--kind", "pareto", "--fingerprint", fingerprint]
    assert cli_main([*args, "--view", "per_user", "--out", str(page)]) == 0
    assert "tokens/s per user" in page.read_text()
    sweep = tmp_path / "sweep.png"
    args = ["chart", "--db", db, "--experiment", exp, "--kind", "search", "--out", str(sweep)]
    assert cli_main(args) == 0
    assert png_size(sweep.read_bytes())[0] > 300
    capsys.readouterr()
    args = ["chart", "--db", db, "--kind", "search", "--search", "7", "--out", str(sweep)]
    assert cli_main(args) == 1
    assert "no search 7" in capsys.readouterr().err
