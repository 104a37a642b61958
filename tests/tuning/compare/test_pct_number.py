"""A ratio's lower bound on the log scale is always above -100 %; shown with one decimal it read
'-100.0 %' (the H100 confirm of 2026-12-07: "99.4 % CI -100.0 … +230965.0 %"), a change that
would mean the metric fell to zero."""

from __future__ import annotations

from tuning.compare.present import ci_text, pct_number, pct_text
from tuning.compare.stats import Change


def test_a_bound_just_above_minus_100_keeps_the_decimals_that_say_so() -> None:
    assert pct_number(-99.99158925724953) == "-99.99"
    assert pct_number(-99.9998541) == "-99.9999"
    assert pct_text(-0.9999158925724952) == "-99.99 %"


def test_ordinary_changes_keep_one_decimal() -> None:
    assert pct_number(10.24) == "+10.2"
    assert pct_number(-55.91) == "-55.9"
    assert pct_number(-100.0) == "-100.0"  # a difference may reach it; a ratio never does
    assert pct_number(230964.97) == "+230965.0"


def test_the_interval_of_a_wide_log_scale_change_never_reads_minus_100() -> None:
    change = Change(
        base_mean=12728.0,
        cand_mean=5611.0,
        rel_change=-0.5591567142112143,
        rel_low=-0.9999158925724952,
        rel_high=2309.649705865126,
        diff_low=None,
        diff_high=None,
        n_base=2,
        n_cand=2,
        verdict="undecided",
        confidence=0.9944444444444445,
    )
    text = ci_text(change, spread=False)
    assert text == "99.4 % CI -99.99 … +230965.0 %", text
