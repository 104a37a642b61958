"""Issue 37 item 6: a huge interval (Compare showed upper bounds of +1,400 % and +3,668 %) shows
the runs and the spread it rests on beside it; an ordinary one does not."""

from __future__ import annotations

from tuning.compare.present import ci_text, verdict_text
from tuning.compare.stats import bootstrap_change


def test_a_huge_interval_says_its_runs_and_spread() -> None:
    change = bootstrap_change([100.0, 400.0], [300.0, 1500.0], "higher")
    assert change.rel_high is not None and change.rel_high - (change.rel_low or 0) > 1.0
    text = ci_text(change)
    assert text.startswith("95 % CI ") and "— wide: 2 + 2 runs, run-to-run CV 85 % / 94 %" in text
    assert "wide: 2 + 2 runs" in verdict_text(change)


def test_an_ordinary_interval_says_nothing_more() -> None:
    change = bootstrap_change([100.0, 101.0, 99.0], [110.0, 111.0, 109.0], "higher")
    assert "wide" not in ci_text(change)
    assert ci_text(change).startswith("95 % CI +")
