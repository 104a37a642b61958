"""Issue 23, item 3: the Compare page's summary lines colour only decided verdicts; an undecided
one reads grey, never green or red by the direction of its change."""

from __future__ import annotations

from tests.factories import undecided_and_better_runs
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
