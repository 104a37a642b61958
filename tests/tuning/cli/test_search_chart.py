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
from tuning.cli.main import main as cli_main
from tuning.compare.selection import select_runs
from tuning.present.charts.tradeoff import search_chart


def test_search_is_recorded_and_charted(
    lab_home: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        flags = (
            f"--param concurrency --range 1:4 --coarse 2 --budget-runs 4 --base-url {srv.base_url}"
        )
        # no SLO: with one run of a value an SLO can stay undecided and leave no choice (it did
        # on a loaded machine); recording and drawing a search is what this test is about
        flags += " --model m --objective p99_ttft_ms --num-requests 4"
        flags += f" --input-len 4 --output-len 3 --num-warmups 0 --db {db} --json"
        done = tuning_cli(["search", *flags.split()], lab_home)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    with connect(db, readonly=True) as conn:
        (row,) = queries.list_searches(conn)
        steps = queries.search_experiment_ids(conn, f"search {row['key']}:")
    estimate = result.pop("estimate")  # the CLI's own line before it started, not the search's
    assert estimate["runs"] == 4 and row["status"] == "done" and len(steps) == 4
    assert result["chosen"] is not None  # two values raced: a choice or a tie's pick
    assert row["result"] == result
    assert row["spec"]["objective"] == "p99_ttft_ms" and not row["spec"]["slo_ms"]
    out = tmp_path / "search.png"
    chart_args = ["chart", "--db", str(db), "--kind", "search", "--search", str(row["id"])]
    assert cli_main([*chart_args, "--out", str(out)]) == 0, capsys.readouterr().err
    assert png_size(out.read_bytes())[0] > 300
    with connect(db, readonly=True) as conn:  # the same chart, with its marks, as data
        comparison = select_runs(conn, experiment_ids=steps).comparison
    chart = search_chart(comparison, objective="p99_ttft_ms", chosen=float(result["chosen"]))
    spec = json.dumps(chart.to_dict())
    assert f"chosen by the search: {result['chosen']:g}" in spec
