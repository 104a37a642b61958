"""Dispatch schedules: Poisson hits its rate, burstiness moves the spread as a gamma should."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tuning.measure.traffic.arrival import (
    gamma_offsets,
    gap_stats,
    poisson_offsets,
    schedule,
    trace_offsets,
)
from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.spec import Arrival


@pytest.mark.parametrize("rate", [10.0, 100.0, 1000.0])
def test_long_poisson_schedule_hits_the_rate_within_one_percent(rate: float) -> None:
    n = 200_000
    offsets = poisson_offsets(n, rate, np.random.default_rng(1), normalize=False)
    assert abs(n / offsets[-1] - rate) <= 0.01 * rate
    assert abs(gap_stats(offsets)["cv"] - 1.0) < 0.01  # exponential gaps


def test_normalized_schedule_ends_at_n_over_rate_like_vllm() -> None:
    offsets = gamma_offsets(500, 20.0, 0.5, np.random.default_rng(0))
    assert offsets[-1] == pytest.approx(500 / 20.0)
    assert offsets == sorted(offsets) and offsets[0] > 0  # the first request waits one gap too


@pytest.mark.parametrize("burstiness", [0.25, 0.5, 1.0, 2.0, 8.0])
def test_burstiness_sets_the_gap_spread(burstiness: float) -> None:
    """Gamma gaps of shape B have CV 1/sqrt(B): below 1 burstier than Poisson, above smoother."""
    offsets = gamma_offsets(100_000, 50.0, burstiness, np.random.default_rng(2), normalize=False)
    stats = gap_stats(offsets)
    assert stats["cv"] == pytest.approx(1 / math.sqrt(burstiness), rel=0.03)
    assert stats["mean_gap_s"] == pytest.approx(1 / 50.0, rel=0.02)


def test_infinite_burstiness_and_rate() -> None:
    assert gamma_offsets(4, 2.0, math.inf, np.random.default_rng(0)) == [0.5, 1.0, 1.5, 2.0]
    assert gamma_offsets(3, math.inf, 1.0, np.random.default_rng(0)) == [0.0, 0.0, 0.0]


def test_trace_offsets_and_speed() -> None:
    assert trace_offsets([1000, 1500, 3000], speed=2.0) == [0.0, 0.25, 1.0]
    with pytest.raises(TrafficError, match="must not decrease"):
        trace_offsets([0, 10, 5])


def test_schedule_by_arrival_kind() -> None:
    assert schedule(Arrival(), 10, 0) is None
    a = schedule(Arrival("open", rate=5.0), 10, 0)
    assert a is not None and a == schedule(Arrival("open", rate=5.0), 10, 0)
    assert a != schedule(Arrival("open", rate=5.0), 10, 1)
    assert schedule(Arrival("trace", speed=0.5), 2, 0, [0, 100]) == [0.0, 0.2]
    with pytest.raises(TrafficError, match="one timestamp per request"):
        schedule(Arrival("trace"), 3, 0, [0, 1])
