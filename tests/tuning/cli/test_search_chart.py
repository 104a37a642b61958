"""A search run from the CLI is recorded in the store (`searches`), and `chart --kind search
--search ID` draws its runs with the chosen value marked (against a fake server, attached)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries
from tests.checks import png_size
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.charts.tradeoff import search_chart
from tuning.cli.main import main as cli_main
from tuning.compare.selection import select_runs


def test_search_is_recorded_and_charted(
    lab_home: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        args = ["search", "--base-url", srv.base_url, "--model", "m", "--param", "concurrency"]
        args += ["--range", "1:4", "--coarse", "2", "--budget-runs", "3"]
        args += ["--num-requests", "4", "--input-len", "4", "--output-len", "3"]
        done = tuning_cli([*args, "--num-warmups", "0", "--db", str(db), "--json"], lab_home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    with connect(db, readonly=True) as conn:
        (row,) = queries.list_searches(conn)
        steps = queries.search_experiment_ids(conn, f"search {row['key']}:")
    assert row["status"] == "done" and row["result"] == result and len(steps) == 3
    out = tmp_path / "search.png"
    chart_args = ["chart", "--db", str(db), "--kind", "search", "--search", str(row["id"])]
    assert cli_main([*chart_args, "--out", str(out)]) == 0, capsys.readouterr().err
    assert png_size(out.read_bytes())[0] > 300
    with connect(db, readonly=True) as conn:  # the same chart, with its marks, as data
        comparison = select_runs(conn, experiment_ids=steps).comparison
    spec = json.dumps(search_chart(comparison, chosen=float(result["chosen"])).to_dict())
    assert f"chosen by the search: {result['chosen']:g}" in spec
