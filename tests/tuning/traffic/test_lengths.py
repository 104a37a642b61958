"""Length samplers: 10,000 draws match the spec's mean and spread within 2%; vLLM's range ratio."""

from __future__ import annotations

import numpy as np
import pytest

from tuning.measure.traffic.lengths import expected, sample, uniform_bounds, upper_bound
from tuning.measure.traffic.spec import Bin, LengthDist

N = 10_000

DISTS = [
    LengthDist("fixed", 300),
    LengthDist("uniform", 1024, range_ratio=0.5),
    LengthDist("uniform", 200, range_ratio=0.1),
    LengthDist("normal", 500, std=100),
    LengthDist("lognormal", 300, std=200),
    LengthDist("lognormal", 80, std=40),
    LengthDist("histogram", bins=(Bin(20, 100, 3), Bin(101, 500, 1), Bin(900, 1000, 0.5))),
]


@pytest.mark.parametrize("dist", DISTS, ids=lambda d: f"{d.kind}-{d.mean}")
def test_ten_thousand_draws_match_the_spec(dist: LengthDist) -> None:
    draws = sample(dist, N, np.random.default_rng(3))
    assert draws.dtype == np.int64 and draws.shape == (N,) and draws.min() >= 1
    mean, std = expected(dist)
    assert abs(draws.mean() - mean) <= 0.02 * mean
    if std:
        assert abs(draws.std() - std) <= 0.02 * std
    else:
        assert draws.std() == 0


def test_uniform_is_vllms_range_ratio_draw() -> None:
    """Same bounds and the same Generator calls as vllm.benchmarks.datasets.get_sampling_params."""
    dist = LengthDist("uniform", 1000, range_ratio=0.25)
    assert uniform_bounds(dist) == (750, 1250)
    ours = sample(dist, 100, np.random.default_rng(0))
    theirs = np.random.default_rng(0).integers(750, 1251, size=100)
    assert (ours == theirs).all()


def test_clipping_and_upper_bounds() -> None:
    dist = LengthDist("normal", 100, std=80, minimum=10, maximum=150)
    draws = sample(dist, N, np.random.default_rng(1))
    assert draws.min() == 10 and draws.max() == 150
    assert upper_bound(dist) == 150
    assert upper_bound(LengthDist("lognormal", 100, std=5)) is None
    assert upper_bound(LengthDist("uniform", 100, range_ratio=0.5)) == 150
    assert upper_bound(LengthDist("histogram", bins=(Bin(1, 9, 1),))) == 9


def test_same_seed_same_draws() -> None:
    dist = LengthDist("lognormal", 300, std=200)
    a = sample(dist, 50, np.random.default_rng(5))
    b = sample(dist, 50, np.random.default_rng(5))
    assert (a == b).all()
