"""Issue 23, item 3: the Compare page's summary lines colour only decided verdicts; an undecided
one reads grey, never green or red by the direction of its change."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.factories import stream_interval_runs, undecided_and_better_runs
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import build_comparison
from ui.summary import summary_line


def test_undecided_summary_line_is_grey_and_decided_one_green() -> None:
    cmp = build_comparison(undecided_and_better_runs(), [1, 2])
    side = cmp.candidates[0]
    tput = summary_line(cmp, side, METRIC_BY_KEY["output_throughput"])
    assert "undecided" in tput and ":gray[" in tput and ":green[" not in tput
    ttft = summary_line(cmp, side, METRIC_BY_KEY["mean_ttft_ms"])
    assert ":green[**▲ better" in ttft


def _summary_app() -> None:
    from tests.factories import drifting_runs
    from tuning.compare.comparison import build_comparison
    from ui.summary import render_summary

    render_summary(build_comparison(drifting_runs(), [1, 4, 5, 8]))


def test_the_summary_states_the_baseline_drift() -> None:
    """Issue 25, item 5: the drift of the baseline, beside the verdicts on the Compare page."""
    at = AppTest.from_function(_summary_app, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    captions = [c.value for c in at.caption]
    assert any(
        "first run 1 → last run 8" in c and "output throughput -7.0 %" in c for c in captions
    ), captions


def test_the_itl_line_says_the_chunk_size_differs() -> None:
    """Issue 37 item 7: stream-interval 1 vs 16, the page's ITL line says so beside its verdict;
    the ITL-per-token and TPOT lines, better, say nothing of chunks."""
    cmp = build_comparison(stream_interval_runs(1.0, 15.06), [1, 2])
    side = cmp.candidates[0]
    itl = summary_line(cmp, side, METRIC_BY_KEY["mean_itl_ms"])
    assert "worse" in itl and ":orange[chunk size differs (1 → 15.1 tokens a chunk)" in itl
    for key in ("mean_itl_per_token_ms", "mean_tpot_ms"):
        line = summary_line(cmp, side, METRIC_BY_KEY[key])
        assert "better" in line and "chunk size" not in line
    same = build_comparison(stream_interval_runs(1.0, 1.0), [1, 2])
    assert "chunk size" not in summary_line(same, same.candidates[0], METRIC_BY_KEY["mean_itl_ms"])
