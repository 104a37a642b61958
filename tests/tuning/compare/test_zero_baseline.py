"""Issue 37 item 6: a metric with a zero or near-zero baseline compares as a difference in its
unit, never as "+100 %": Compare showed "peak KV-cache usage 0.0 % -> 0.0 % (+100 %) worse"."""

from __future__ import annotations

from tests.factories import run_row
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import build_comparison
from tuning.compare.present import change_text, table_rows, tone, verdict_text
from tuning.compare.stats import bootstrap_change


def _comparison() -> object:
    # peak KV usage 0.02 % -> 0.04 %; preemptions 0 -> 2 or 3
    runs = [
        run_row(1, 16, peak_kv_cache_usage_perc=0.0002, preemptions=0),
        run_row(2, 16, peak_kv_cache_usage_perc=0.00021, preemptions=0),
        run_row(3, 64, peak_kv_cache_usage_perc=0.0004, preemptions=2),
        run_row(4, 64, peak_kv_cache_usage_perc=0.00041, preemptions=3),
    ]
    return build_comparison(runs, [1, 2])


def test_near_zero_kv_usage_reads_as_points_not_percent() -> None:
    comparison = _comparison()
    side = comparison.candidates[0]  # type: ignore[attr-defined]
    kv = comparison.changes[(side.label, "peak_kv_cache_usage_perc")]  # type: ignore[attr-defined]
    assert kv.rel_change is None and kv.rel_low is None  # no % at all
    assert kv.scale == "difference"
    text = change_text(kv, "fraction")
    assert text == "+0.02 pp" and "%" not in text
    assert "+100" not in verdict_text(kv, unit="fraction")
    # no better direction: a real change is "changed", never green or red
    assert kv.verdict in ("changed", "undecided")
    assert tone(METRIC_BY_KEY["peak_kv_cache_usage_perc"], kv) == "muted"


def test_preemptions_from_zero_read_as_a_count() -> None:
    comparison = _comparison()
    side = comparison.candidates[0]  # type: ignore[attr-defined]
    pre = comparison.changes[(side.label, "preemptions")]  # type: ignore[attr-defined]
    assert pre.rel_change is None
    assert change_text(pre, "count") == "+2.5"
    cells = {row[0].text: row for row in table_rows(comparison)}  # type: ignore[arg-type]
    delta = cells["preemptions (count)"][1].text
    assert delta == "+2.5" and "%" not in delta


def test_a_difference_scale_metric_is_judged_as_a_difference_even_when_positive() -> None:
    """Positive throughout (a ratio would exist), but the catalogue reads KV usage as a
    difference: the interval and the verdict are on mean_c - mean_b."""
    ch = bootstrap_change([0.10, 0.11], [0.30, 0.31], "neither", metric_scale="difference")
    assert ch.scale == "difference" and ch.rel_change is None
    assert ch.diff is not None and abs(ch.diff - 0.2) < 1e-9
