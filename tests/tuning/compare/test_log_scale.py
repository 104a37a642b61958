"""Issue 23, item 2: a % change's interval is valid. Positive metrics are judged on the log scale
of the ratio of the means, so a % interval never reads below -100 % and a 10x drop from two runs a
side is as clear as a 10x rise; metrics with a run <= 0 keep the difference scale, clipped at
-100 % when they cannot be negative; whiskers of a side's mean never go below 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuning.compare.present import ci_text, verdict_text
from tuning.compare.stats import (
    MARGIN,
    bootstrap_change,
    change_interval,
    mean_interval,
    more_runs,
    scale_of,
)

# The H200 case of the issue: max-num-batched-tokens 512 (baseline) vs 4096, mean TTFT per run.
TTFT_512 = [2743.0, 2344.0]
TTFT_4096 = [236.0, 189.0]


def test_h200_ttft_drop_is_decided_better_with_an_interval_above_minus_100() -> None:
    # before: "-91.6 % undecided (95 % CI -185.7 ... +2.4 %)", on the difference scale
    ch = bootstrap_change(TTFT_512, TTFT_4096, "lower")
    assert ch.scale == "log"
    assert ch.rel_change == pytest.approx(-0.9165, abs=1e-4)
    assert ch.verdict == "better"
    assert ch.rel_low is not None and ch.rel_high is not None
    assert -1.0 < ch.rel_low < ch.rel_change < ch.rel_high < 0.0
    assert ch.log_low is not None and ch.log_high is not None
    assert ch.rel_low == pytest.approx(math.expm1(ch.log_low))
    assert ch.rel_high == pytest.approx(math.expm1(ch.log_high))
    assert ch.diff_low is not None and ch.base_mean is not None and ch.diff_low > -ch.base_mean
    assert verdict_text(ch).startswith("▲ better") and "-95.6 … -84.0 %" in ci_text(ch)


def test_h200_case_swapped_is_worse_with_the_log_interval_negated() -> None:
    a = bootstrap_change(TTFT_512, TTFT_4096, "lower")
    z = bootstrap_change(TTFT_4096, TTFT_512, "lower")
    assert (a.verdict, z.verdict) == ("better", "worse")
    assert a.log_low is not None and a.log_high is not None
    assert z.log_low == pytest.approx(-a.log_high) and z.log_high == pytest.approx(-a.log_low)


def test_no_percent_interval_below_minus_100_for_large_drops() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(2, 5))
        base = list(1000 * np.exp(rng.normal(0, 0.3, n)))
        cand = list(1000 * rng.uniform(0.01, 1.2) * np.exp(rng.normal(0, 0.3, n)))
        ch = bootstrap_change(base, cand, "lower")
        assert ch.rel_low is not None and ch.rel_low > -1.0


def test_a_non_negative_count_with_zeros_keeps_the_difference_scale_clipped_at_minus_100() -> None:
    base, cand = [5.0, 40.0, 3.0], [0.0, 0.0, 1.0]  # preemptions: a zero has no logarithm
    assert scale_of(base, cand) == "difference"
    ch = bootstrap_change(base, cand, "lower")
    assert ch.scale == "difference" and ch.log_low is None
    assert ch.rel_low is not None and ch.rel_low >= -1.0
    assert ch.diff_low is not None and ch.diff_low >= -(ch.base_mean or 0.0)
    # zeros on both sides: no change, no ratio, still equivalent
    assert bootstrap_change([0, 0], [0, 0]).verdict == "equivalent"


def test_a_quantity_that_can_be_negative_is_not_clipped() -> None:
    ch = bootstrap_change([1.0, 3.0, 2.0], [-40.0, 10.0, -30.0], "higher")
    assert ch.scale == "difference" and ch.diff_low is not None
    assert ch.diff_low < -(ch.base_mean or 0.0)


def test_aa_stays_undecided_or_equivalent() -> None:
    for base, cand in (([2743.0, 2344.0], [2600.0, 2500.0]), ([100.0, 103.0], [101.0, 102.0])):
        for better in ("lower", "higher"):
            assert bootstrap_change(base, cand, better).verdict in ("undecided", "equivalent")
    rng = np.random.default_rng(11)
    wrong = 0
    for _ in range(300):
        base, cand = (
            list(100 * (1 + rng.normal(0, 0.05, 3))),
            list(100 * (1 + rng.normal(0, 0.05, 3))),
        )
        wrong += bootstrap_change(base, cand, resamples=400).verdict in ("better", "worse")
    assert wrong <= 18  # at most ~5 % of A/A comparisons claim a difference


def test_one_run_a_side_stays_undecided() -> None:
    for b, c in (
        (TTFT_512[:1], TTFT_4096[:1]),
        (TTFT_512, TTFT_4096[:1]),
        (TTFT_512[:1], TTFT_4096),
    ):
        ch = bootstrap_change(b, c, "lower")
        assert ch.verdict == "undecided" and ch.rel_low is None and ch.log_low is None
        assert ch.more is not None and ch.more.runs is not None and ch.more.runs >= 1


def test_more_runs_uses_the_log_scale_spread_and_is_symmetric() -> None:
    # an equivalence goal under a wide margin: on the difference scale the margin was a share of
    # the baseline's mean, so swapping the sides changed the estimate (9 vs 4 runs a side)
    base, cand = [100.0, 110.0, 90.0], [118.0, 128.0, 108.0]
    a = more_runs(base, cand, margin=0.3)
    z = more_runs(cand, base, margin=0.3)
    assert a.goal == z.goal == "equivalence" and a.runs is not None and a.runs == z.runs
    # scale-free: the same ratios at 1000x the values need the same runs
    big = more_runs([x * 1000 for x in base], [x * 1000 for x in cand], margin=0.3)
    assert big.runs == a.runs
    # and an undecided verdict still carries an estimate that mostly decides it
    rng = np.random.default_rng(5)
    tried = decided = 0
    for _ in range(30):
        b, c = (
            list(100 * np.exp(rng.normal(0, 0.15, 3))),
            list(140 * np.exp(rng.normal(0, 0.15, 3))),
        )
        ch = bootstrap_change(b, c, "lower")
        if ch.verdict != "undecided" or ch.more is None or ch.more.runs is None:
            continue
        k = ch.more.runs
        b += list(100 * np.exp(rng.normal(0, 0.15, k)))
        c += list(140 * np.exp(rng.normal(0, 0.15, k)))
        tried += 1
        decided += bootstrap_change(b, c, "lower").verdict != "undecided"
    assert tried >= 5 and decided / tried >= 0.6


def test_equivalence_margin_is_symmetric_on_the_log_scale() -> None:
    band = math.log1p(MARGIN)
    base = [100.0, 100.01, 99.99, 100.0, 100.02]
    cand = [101.5, 101.51, 101.49, 101.5, 101.52]  # +1.5 %: inside ±log(1.02) both ways
    for b, c in ((base, cand), (cand, base)):
        ch = bootstrap_change(b, c)
        assert ch.verdict == "equivalent"
        assert ch.log_low is not None and ch.log_high is not None
        assert -band <= ch.log_low and ch.log_high <= band


def test_change_interval_names_its_scale() -> None:
    log, diff = change_interval([1.0, 2.0], [3.0, 4.0]), change_interval([0.0, 2.0], [3.0, 4.0])
    assert log is not None and log[0] == "log" and diff is not None and diff[0] == "difference"
    assert change_interval([1.0], [3.0, 4.0]) is None


def test_whiskers_of_a_mean_never_go_below_zero() -> None:
    # before: Student's t with 1 df put two runs' whisker at -10.9 (13.23 and 9.71) or far lower
    for vals in ([13.23, 9.71], [2743.0, 2344.0], [236.0, 20.0], [0.0, 3.0], [0.0, 0.0, 9.0]):
        lo, hi = mean_interval(vals) or (-1.0, -1.0)
        assert 0.0 <= lo <= float(np.mean(vals)) <= hi
    lo, hi = mean_interval([13.23, 9.71]) or (0.0, 0.0)
    assert lo < 9.71 - 5 and hi > 13.23 + 5  # still honest about two runs: not their min-max
