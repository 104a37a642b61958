"""Issue 23, item 3: the Compare page's side-by-side table styles cells from the shared tones:
undecided rows get the neutral grey, decided ones green or red."""

from __future__ import annotations

from tests.factories import undecided_and_better_runs
from tuning.compare.comparison import build_comparison
from tuning.compare.present import TONE_CSS
from ui.compare import table_frames


def test_undecided_rows_are_grey_in_the_page_table() -> None:
    text, css = table_frames(build_comparison(undecided_and_better_runs(), [1, 2]))
    tput = text.index[text["metric"].str.startswith("output throughput")][0]
    ttft = text.index[text["metric"].str.startswith("mean TTFT")][0]
    cand = list(text.columns[1:3])  # Δ and verdict of the candidate, right after the metric
    assert set(css.loc[tput, cand]) == {TONE_CSS["muted"]}
    assert set(css.loc[ttft, cand]) == {TONE_CSS["better"]}
    assert "#1a7f37" not in " ".join(css.loc[tput])
