"""Issue 23, item 3: undecided is neutral. Only a decided better / worse verdict is green / red;
an undecided, equivalent or not-applied change is the one grey tone, whatever its direction, in
the table's cells that the page, the CLI and the report all draw."""

from __future__ import annotations

from tests.factories import undecided_and_better_runs
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import Comparison, build_comparison
from tuning.compare.present import TONE_COLOR, TONE_CSS, TONE_MARK, table_rows, tone, tone_css

TPUT = METRIC_BY_KEY["output_throughput"]


def undecided_and_better() -> Comparison:
    return build_comparison(undecided_and_better_runs(), [1, 2])


def test_an_undecided_change_is_grey_whatever_its_direction() -> None:
    cmp = undecided_and_better()
    side = cmp.candidates[0].label
    up = cmp.changes[(side, "output_throughput")]
    assert up.verdict == "undecided" and up.rel_change is not None and up.rel_change > 0
    assert tone(TPUT, up) == "muted"  # was "faint-better": green for a change not decided
    ttft = cmp.changes[(side, "mean_ttft_ms")]
    assert ttft.verdict == "better" and tone(METRIC_BY_KEY["mean_ttft_ms"], ttft) == "better"


def test_table_cells_of_undecided_rows_carry_no_green_or_red() -> None:
    cmp = undecided_and_better()
    rows = {row[0].text.split(" (")[0]: row for row in table_rows(cmp)}
    tput, ttft = rows["output throughput"], rows["mean TTFT"]
    assert {c.tone for c in tput[1:]} <= {"", "muted"}  # Δ, verdict, to decide, the means
    assert ttft[-1].text == "for information, not corrected"  # the role: no decision here
    assert ttft[1].tone == ttft[2].tone == "better"  # Δ and verdict of the candidate


def test_the_tones_are_defined_once_and_grey_is_neutral() -> None:
    assert set(TONE_CSS) == set(TONE_COLOR) == set(TONE_MARK) == {"", "muted", "better", "worse"}
    css = tone_css()
    assert ".muted{color: #6e7781}" in css and "faint" not in css
    assert TONE_MARK["muted"] == "gray"


def test_the_noise_floor_names_metrics_as_people_read_them() -> None:
    """Issue 23 (smaller): the noise-floor note said `mean_ttft_ms`; it says "mean TTFT"."""
    from tuning.compare.present import noise_text

    text = noise_text(undecided_and_better()) or ""
    assert "output throughput: run-to-run CV" in text and "mean TTFT: run-to-run CV" in text
    assert "mean_ttft_ms" not in text and "output_throughput" not in text
