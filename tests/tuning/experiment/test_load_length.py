"""Issue 37 item 3 and issue 38 item 6: from the measured start cost and run-to-run spread, the
lab proposes the requests per run that minimise the time to a decision and says the trade. The
numbers below are worked by hand from the model in tuning.experiment.load_length's docstring."""

from __future__ import annotations

import math

import pytest

from tuning.experiment.load_length import (
    advise,
    observed_effect,
    pooled_cv,
    runs_a_side,
    within_run_cv,
)

K2 = (1.959964 + 0.841621) ** 2  # (z_0.975 + z_0.8)^2


def test_runs_a_side_follow_the_two_sample_formula_and_never_fall_under_two() -> None:
    assert runs_a_side(0.15**2, 0.05) == math.ceil(2 * K2 * 0.0225 / 0.0025) == 142
    assert runs_a_side(0.001**2, 0.05) == 2  # a verdict needs two runs a side


def test_short_noisy_runs_are_told_longer_loads_decide_sooner_and_by_how_much() -> None:
    """The H100 search of issue 37: 6-12 s of load a run, a minute of start and the rest, a
    15 % spread that is mostly noise within each run. Six times the requests per run needs 39
    runs a side instead of 142: about 2.6 hours instead of 5.5 (eight times: 34 a side, but
    each run longer, 2.64 hours)."""
    advice = advise(start_s=60.0, load_s=10.0, requests=768, spread=0.15, within=0.14, effect=0.05)
    assert (advice.current.requests, advice.current.runs_a_side) == (768, 142)
    assert advice.current.seconds == pytest.approx(2 * 142 * 70.0)
    best = advice.best
    assert (best.requests, best.load_s, best.runs_a_side) == (4608, 60.0, 39)
    assert best.seconds == pytest.approx(2 * 39 * 120.0)
    eight = next(o for o in advice.options if o.requests == 8 * 768)
    assert (eight.runs_a_side, eight.seconds) == (34, pytest.approx(2 * 34 * 140.0))
    assert advice.longer_is_faster
    line = advice.line()
    print(line)
    assert line.startswith("load length: 768 requests, 10 s of load a run decides in about 331 min")
    assert "4,608 requests a run (60 s runs: about 39 a side; 10 s runs: about 142 a side)" in line
    assert "would decide about 175 min sooner than more restarts" in line
    assert "run-to-run spread 15%, 14% of it within a run, a 5% change" in line


def test_noise_between_runs_only_is_not_cured_by_longer_loads() -> None:
    advice = advise(start_s=60.0, load_s=30.0, requests=512, spread=0.05, within=0.0, effect=0.1)
    assert not advice.longer_is_faster
    assert all(o.runs_a_side == advice.current.runs_a_side for o in advice.options)
    assert advice.best.requests < advice.current.requests  # shorter loads, same runs: cheaper
    assert "than more restarts" not in advice.line()


def test_a_load_already_long_enough_is_said_to_be_about_right() -> None:
    # runs a side at 0.5x, 1x, 2x, 3x today's 30 s: 9, 6, 5, 4; seconds 1350, 1080, 1200, 1200
    advice = advise(start_s=60.0, load_s=30.0, requests=512, spread=0.03, within=0.02, effect=0.05)
    assert [o.runs_a_side for o in advice.options[:4]] == [9, 6, 5, 4]
    assert advice.best == advice.current and not advice.sooner
    assert "is about right for the noise seen" in advice.line()
    with pytest.raises(ValueError):
        advise(start_s=5.0, load_s=0.0, requests=1, spread=0.1, within=0.1, effect=0.1)


def _requests(tokens_by_window: list[int], per_window: int = 10) -> list[dict[str, float]]:
    """Requests ending evenly over len(tokens_by_window) seconds, each window's tokens split."""
    out = []
    for w, tokens in enumerate(tokens_by_window):
        for i in range(per_window):
            end = w + (i + 0.5) / per_window
            out.append({"ok": 1, "start": 0.0, "end": end, "output_tokens": tokens / per_window})
    return out


def test_noise_within_a_run_is_read_from_windows_of_its_own_requests() -> None:
    assert within_run_cv(_requests([100, 100, 100, 100])) == pytest.approx(0.0, abs=1e-12)
    rates = [100, 100, 100, 200]  # tokens per 1 s window
    mean, sd = 125.0, math.sqrt(sum((r - 125.0) ** 2 for r in rates) / 3)
    assert within_run_cv(_requests(rates)) == pytest.approx(sd / 2 / mean)
    assert within_run_cv(_requests([100, 100, 100, 100], per_window=1)) is None  # too few


def test_spread_and_effect_from_each_side_s_runs() -> None:
    sides = [[100.0, 110.0], [200.0, 220.0]]
    assert pooled_cv(sides) == pytest.approx(math.sqrt((50.0 + 200.0) / 2) / 157.5)
    assert pooled_cv([[100.0], [200.0]]) is None
    assert observed_effect(sides) == pytest.approx(1.0)
