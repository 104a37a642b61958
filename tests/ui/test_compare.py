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


def test_single_and_layered_charts_keep_their_plot_height_on_the_page() -> None:
    """Issue 37 item 8: Streamlit gives a one-view or layered spec without `autosize` its "fit",
    which fits title, subtitle and axes into the plot's own height (the throughput plot drew 0 px
    tall); the page asks "fit-x" for those, and leaves compositions and a chart's own choice be."""
    from tuning.compare.comparison import build_comparison as build
    from tuning.present.charts.compare import latency_chart, throughput_chart
    from ui.compare import PAGE_AUTOSIZE, _Checked

    cmp = build(undecided_and_better_runs(), [1, 2])
    bars = _Checked(throughput_chart(cmp)).to_dict()
    assert "layer" in bars and bars["autosize"] == PAGE_AUTOSIZE == {
        "type": "fit-x",
        "contains": "padding",
    }
    assert bars["height"] == 260  # the plot's, with the title and axes added around it
    assert "autosize" not in _Checked(latency_chart(cmp)).to_dict()  # a facet: Streamlit's "pad"
    own = throughput_chart(cmp).properties(autosize="pad")
    assert _Checked(own).to_dict()["autosize"] == "pad"
    assert "autosize" not in throughput_chart(cmp).to_dict()  # exports keep Vega's sizing
