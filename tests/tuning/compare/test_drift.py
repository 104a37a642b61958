"""Issue 25, item 5: the drift between the baseline's first and last runs (same configuration, so
pure drift of the machine) is computed for the metrics and stated beside the verdicts."""

from __future__ import annotations

import random

import pytest

from tests.factories import drifting_runs
from tuning.compare.comparison import build_comparison
from tuning.compare.present import drift_text


def test_the_baseline_drift_is_its_first_run_against_its_last() -> None:
    cmp = build_comparison(drifting_runs(), [1, 4, 5, 8])
    drift = {d.metric: d for d in cmp.drift}
    tput = drift["output_throughput"]
    assert (tput.first_run, tput.last_run, tput.first, tput.last) == (1, 8, 1000.0, 930.0)
    assert tput.rel_change == pytest.approx(-0.07)
    assert drift["mean_ttft_ms"].rel_change == pytest.approx(0.07)
    # A B B A: the drift hits both values alike, so the candidate's mean is the baseline's
    change = cmp.changes[(cmp.candidates[0].label, "output_throughput")]
    assert change.base_mean == pytest.approx(965.0) and change.cand_mean == pytest.approx(965.0)
    row = next(d for d in cmp.to_json()["baseline_drift"] if d["metric"] == "output_throughput")
    assert row == {
        "metric": "output_throughput",
        "first_run": 1,
        "last_run": 8,
        "first": 1000.0,
        "last": 930.0,
        "change_pct": pytest.approx(-7.0),
    }


def test_the_order_they_ran_decides_first_and_last_not_the_list() -> None:
    runs = drifting_runs()
    runs[0]["started_at"] = "2026-01-01T11:00:00+00:00"  # run 1 was in fact the last to run
    random.Random(3).shuffle(runs)
    tput = next(
        d for d in build_comparison(runs, [1, 4, 5, 8]).drift if d.metric == "output_throughput"
    )
    assert (tput.first_run, tput.last_run, tput.first, tput.last) == (4, 1, 970.0, 1000.0)


def test_the_drift_reads_in_words_and_past_the_margin_says_so() -> None:
    cmp = build_comparison(drifting_runs(), [1, 4, 5, 8])
    text = drift_text(cmp)
    assert text is not None and text.startswith("Drift of the baseline, first run 1 → last run 8:")
    assert "output throughput -7.0 %" in text and "mean TTFT +7.0 %" in text
    assert "more than the ±2 % margin" in text
    quiet = build_comparison(drifting_runs(), [1, 4, 5, 8], margin=0.10)
    assert "margin" not in (drift_text(quiet) or "")
    one = build_comparison(drifting_runs()[:3], [1])  # one baseline run: no drift to show
    assert one.drift == [] and drift_text(one) is None
