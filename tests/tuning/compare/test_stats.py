"""The verdict rule: runs are the bootstrap unit, one run is never a verdict, A/A is equivalent or
undecided, a change inside the margin is equivalent, and swapping baseline and candidate flips the
verdict."""

from __future__ import annotations

import numpy as np
import pytest

from tuning.compare.stats import bootstrap_change


def sides(noise: float, shift: float, n: int = 5, seed: int = 3) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = list(100.0 * (1 + rng.normal(0, noise, n)))
    cand = list(100.0 * (1 + shift) * (1 + rng.normal(0, noise, n)))
    return base, cand


def test_aa_is_equivalent_or_undecided() -> None:
    base, cand = sides(noise=0.01, shift=0.0)
    for better in ("lower", "higher"):
        assert bootstrap_change(base, cand, better).verdict in ("equivalent", "undecided")
    same = [100.0, 101.0, 99.0]
    ch = bootstrap_change(same, list(same))
    assert ch.verdict in ("equivalent", "undecided") and ch.rel_change == 0.0


def test_aa_over_many_seeds_rarely_claims_a_difference() -> None:
    # better/worse means the 95 % interval excludes 0: about 5 % of A/A comparisons, no more
    wrong = 0
    for seed in range(400):
        base, cand = sides(noise=0.01, shift=0.0, seed=seed)
        wrong += bootstrap_change(base, cand, resamples=500).verdict in ("better", "worse")
    assert wrong <= 24


def test_ten_percent_latency_increase_with_repeats_is_worse() -> None:
    base, cand = sides(noise=0.01, shift=0.10)
    ch = bootstrap_change(base, cand, "lower")
    assert ch.verdict == "worse"
    assert ch.rel_change == pytest.approx(0.10, abs=0.02)
    assert ch.rel_low is not None and ch.rel_high is not None
    assert 0 < ch.rel_low < ch.rel_change < ch.rel_high
    # the same numbers as throughput (higher is better) read as better
    assert bootstrap_change(base, cand, "higher").verdict == "better"


def test_one_run_per_side_is_never_better_or_worse() -> None:
    assert bootstrap_change([100.0], [200.0]).verdict == "undecided"
    assert bootstrap_change([100.0, 100.5, 99.5], [200.0]).verdict == "undecided"
    assert bootstrap_change([100.0], [200.0, 201.0, 199.0]).verdict == "undecided"
    assert bootstrap_change([], [1.0, 2.0]).verdict == "undecided"


def test_swapping_baseline_and_candidate_flips_the_verdict() -> None:
    for shift in (0.10, -0.07, 0.03):
        base, cand = sides(noise=0.01, shift=shift)
        a = bootstrap_change(base, cand, "lower")
        b = bootstrap_change(cand, base, "lower")
        flip = {"better": "worse", "worse": "better"}
        assert b.verdict == flip.get(a.verdict, a.verdict)
        # the verdict's interval is of log(mean_c / mean_b): swapping negates it exactly
        assert a.scale == b.scale == "log"
        assert a.log_low == pytest.approx(-b.log_high) and a.log_high == pytest.approx(-b.log_low)


def test_tiny_but_consistent_change_is_equivalent() -> None:
    base = [100.0, 100.01, 99.99, 100.0, 100.02]
    cand = [100.5, 100.51, 100.49, 100.5, 100.52]  # +0.5 %: real, but inside the ±2 % margin
    assert bootstrap_change(base, cand).verdict == "equivalent"


def test_zero_baseline_counts() -> None:
    ch = bootstrap_change([0, 0, 0], [3, 4, 5], "lower")  # preemptions appear
    assert ch.verdict == "worse" and ch.rel_change is None
    assert bootstrap_change([0, 0], [0, 0]).verdict == "equivalent"
