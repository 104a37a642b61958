"""Issue 23 item 4: no raw byte count over 9,999 in the report, the exports' human columns or the
charts of a comparison of kv-cache-memory-bytes runs (the H200's 1 GiB vs 16 GiB)."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.units import GIB
from store import open_db, snapshot
from tuning.compare.comparison import Comparison
from tuning.compare.selection import select_runs
from tuning.present import export
from tuning.present.charts.compare import bar_chart, knee_chart
from tuning.present.report import build_report

DECISIONS = Path(__file__).resolve().parents[3] / "examples" / "h200" / "lab-h200-decisions.db.xz"
BYTE_METRICS = ("peak_gpu_tree_bytes", "peak_tree_rss_bytes")


@pytest.fixture
def db_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "decisions.db"
    shutil.copy(snapshot.expanded(DECISIONS), copy)
    return copy


@pytest.fixture
def comparison(db_copy: Path) -> Iterator[Comparison]:
    with open_db(db_copy, readonly=True) as db:
        yield select_runs(db, experiment_ids=[1]).comparison


def byte_counts(cmp: Comparison) -> set[int]:
    """Every byte count the comparison holds over 9,999: the sides' values and the bytes
    metrics' means and per-run values."""
    out = {int(s.value) for s in cmp.sides if s.value is not None}
    for side in cmp.sides:
        for key in BYTE_METRICS:
            mean = side.stats(key)["mean"]
            out |= {int(v) for v in (side.values.get(key) or [])}
            out |= {int(mean)} if mean is not None else set()
    return {n for n in out if n > 9_999}


def spelled(n: int) -> re.Pattern[str]:
    """n as any text might write it: 17179869184, 17,179,869,184 (not inside a longer number)."""
    return re.compile(rf"(?<![\d,]){re.escape(str(n))}(?![\d])|(?<![\d,]){re.escape(f'{n:,}')}")


def test_the_report_shows_no_byte_count_over_9999(db_copy: Path, comparison: Comparison) -> None:
    counts = byte_counts(comparison)
    assert {GIB, 16 * GIB} <= counts  # the experiment's two values, so the scan means something
    html = build_report(db_copy, experiment_ids=[1])
    shown = [n for n in counts if spelled(n).search(html)]
    assert shown == []
    assert "kv-cache-memory-bytes = 1 GiB" in html and "1 GiB, 16 GiB" in html


def test_exports_keep_raw_numbers_and_add_the_human_ones(comparison: Comparison) -> None:
    rows = list(csv.DictReader(io.StringIO(export.comparison_csv(comparison).decode())))
    gpu = [r for r in rows if r["metric"] == "peak_gpu_tree_bytes"]
    assert {r["value"] for r in gpu} == {str(GIB), str(16 * GIB)}  # machine-readable as before
    assert {r["value_shown"] for r in gpu} == {"1 GiB", "16 GiB"}
    assert all(r["mean_shown"].endswith(" GiB") for r in gpu)
    assert {r["side"] for r in gpu} == {
        "kv-cache-memory-bytes = 1 GiB",
        "kv-cache-memory-bytes = 16 GiB",
    }
    data = json.loads(export.comparison_json(comparison))
    assert data["baseline"]["label"] == "kv-cache-memory-bytes = 1 GiB"
    human = " ".join(str(r[k]) for r in rows for k in ("side", "value_shown", "mean_shown"))
    assert [n for n in byte_counts(comparison) if spelled(n).search(human)] == []


def test_byte_axes_are_drawn_in_gib(comparison: Comparison) -> None:
    bar = bar_chart(comparison, "peak_gpu_tree_bytes").to_dict()
    text = json.dumps(bar)
    assert "peak GPU memory (server tree) (GiB)" in text and "(bytes)" not in text
    means = [row["mean"] for rows in bar["datasets"].values() for row in rows if "mean" in row]
    assert means and all(1 < m < 200 for m in means)  # GiB of an H200, not 6e10
    knee = knee_chart(comparison, ("output_throughput",)).to_dict()
    xs = [row["x"] for rows in knee["datasets"].values() for row in rows if "x" in row]
    assert sorted(xs) == [1.0, 16.0]
    assert "kv-cache-memory-bytes (GiB)" in json.dumps(knee)
