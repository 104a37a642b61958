"""Issue 13 item 6: the Pareto front over one workload's runs and metric vs value with the chosen
value and the knee marked, drawn from a seeded lab and exported as valid PNGs."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from PIL import Image

from store import connect, queries, repo
from tests.checks import png_size
from tests.factories import seed_lab
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.compare.frontier import pareto_front, side_knee
from tuning.present import export
from tuning.present.charts.tradeoff import (
    pareto_chart,
    pareto_frame,
    search_chart,
    tradeoff_runs,
)

# max-num-seqs -> (output tok/s, p99 TTFT ms): scales to 8, then flat while TTFT climbs.
KNEE_SHAPE = {1: (100.0, 50.0), 2: (200.0, 52.0), 4: (390.0, 55.0), 8: (760.0, 60.0)}
KNEE_SHAPE |= {16: (790.0, 130.0), 32: (800.0, 260.0)}


def _valid_png(data: bytes) -> tuple[int, int]:
    size = png_size(data)
    with Image.open(io.BytesIO(data)) as img:
        img.load()  # decodes every pixel: a truncated or corrupt file raises
        assert img.size == size
    return size


def _sweep(path: Path) -> Any:
    info = seed_lab(
        path, values=tuple(KNEE_SHAPE), repeats=2, with_failed=False, with_secrets=False
    )
    with connect(path) as db:
        for rid in info["run_ids"]:
            run = queries.get_run(db, rid)
            tput, ttft = KNEE_SHAPE[int(run["value"])]
            jitter = 1.0 + 0.01 * (int(run["repeat_index"]) or -1)
            repo.update_run(db, rid, output_throughput=tput * jitter, p99_ttft_ms=ttft * jitter)
        runs = queries.load_runs(db, info["run_ids"])
    return build_comparison(runs, default_baseline(runs))


def test_pareto_marks_the_non_dominated_runs_and_exports_a_png(
    charts_lab: dict[str, Any],
) -> None:
    db = charts_lab["db"]
    fingerprint = charts_lab["runs"][0]["workload_fingerprint"]
    runs = tradeoff_runs(db, fingerprint)
    assert len(runs) == len(charts_lab["runs"])  # every run of the one workload
    frame = pareto_frame(runs, "ttft")
    expected = pareto_front(
        [(int(r["id"]), r["p99_ttft_ms"], r["output_throughput"]) for r in runs],
        ("lower", "higher"),
    )
    assert set(frame.loc[frame["front"], "run"]) == expected and expected
    assert len(expected) < len(frame)  # some runs are dominated
    chart = pareto_chart(frame, "ttft", fingerprint)
    assert "non-dominated" in json.dumps(chart.to_dict())
    width, height = _valid_png(export.chart_png(chart))
    assert width > 300 and height > 200
    per_user = pareto_frame(runs, "per_user")
    tpot = {int(r["id"]): r["mean_tpot_ms"] for r in runs}
    pairs = zip(per_user["run"], per_user["y"], strict=True)
    assert all(abs(y - 1000.0 / tpot[rid]) < 1e-9 for rid, y in pairs)
    _valid_png(export.chart_png(pareto_chart(per_user, "per_user", fingerprint)))


def test_search_chart_marks_the_chosen_value_and_the_knee(tmp_path: Path) -> None:
    comparison = _sweep(tmp_path / "lab.db")
    found = side_knee(comparison, ("output_throughput", "p99_ttft_ms"))
    assert found is not None and found.value == 8
    chart = search_chart(comparison, chosen=16.0)
    spec = json.dumps(chart.to_dict())
    assert '"chosen"' in spec and '"knee"' in spec and "knee at 8" in spec
    assert "the rule the verdicts use" in spec  # whiskers: the verdicts' interval
    _valid_png(export.chart_png(chart))
    # chosen and knee on one value share one label
    both = json.dumps(search_chart(comparison, chosen=8.0).to_dict())
    assert '"chosen, knee"' in both
