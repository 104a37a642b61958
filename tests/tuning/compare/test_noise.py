"""Issue 37 item 6: the smallest resolvable change uses the same t and power as "more runs would
decide it" (stats.more_runs), not z = 1.96: with 2 runs a side Welch's t has 2 degrees of freedom,
t = 4.30 at 97.5 %, and the floor is (4.30 + 0.84) x CV, 2.6 times what z said."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pytest

from tuning.compare.noise import noise_floor
from tuning.compare.stats import POWER, more_runs


def test_noise_floor_at_two_runs_a_side_uses_t_4_30() -> None:
    nf = noise_floor([100.0, 110.0])
    cv = float(np.std([100.0, 110.0], ddof=1) / 105.0)
    assert nf.n == 2 and nf.cv == pytest.approx(cv)
    assert nf.t == pytest.approx(4.3027, abs=1e-3)  # t(0.975, 2 df), not 1.96
    z_power = NormalDist().inv_cdf(POWER)
    assert nf.min_detectable == pytest.approx((4.3027 + z_power) * cv * 1.0, rel=1e-3)
    assert nf.min_detectable > 2.5 * 1.96 * cv  # the old floor was 2.6x too optimistic


def test_noise_floor_with_more_runs() -> None:
    values = [100.0, 102.0, 98.0, 101.0, 99.0]
    nf = noise_floor(values)
    cv = np.std(values, ddof=1) / 100
    assert nf.t == pytest.approx(2.306, abs=1e-3)  # 8 degrees of freedom
    z_power = NormalDist().inv_cdf(POWER)
    assert nf.min_detectable == pytest.approx((2.306 + z_power) * cv * np.sqrt(2 / 5), rel=1e-3)
    assert noise_floor([5.0]).min_detectable is None


def test_the_floor_agrees_with_the_repeat_estimate() -> None:
    """A change the size of the floor at n runs a side needs no more runs than the estimate's
    least (1: it never says 0 for an undecided verdict) by more_runs, at the same spread on the
    difference scale where the floor's CV is exact; a change well under the floor needs more."""
    base = [100.0, 104.0, 96.0, 100.0]
    nf = noise_floor(base)
    assert nf.min_detectable is not None
    step = nf.min_detectable * 100.0 * 1.01  # just over the floor
    cand = [v + step for v in base]
    assert more_runs(base, cand, metric_scale="difference").runs == 1
    smaller = [v + step * 0.6 for v in base]
    assert (more_runs(base, smaller, metric_scale="difference").runs or 99) > 2
