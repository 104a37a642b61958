"""Issue 13 item 6, the numbers under the views: the Pareto front (non-dominated runs) and the knee
of a sweep, as defined in tuning.compare.frontier."""

from __future__ import annotations

import random

from tuning.compare.frontier import axis_value, dominates, knee, pareto_front

UP_DOWN = ("lower", "higher")  # x = p99 TTFT (lower is better), y = throughput (higher)


def test_front_keeps_exactly_the_non_dominated_runs() -> None:
    points = [
        (1, 100.0, 1000.0),  # fast, low throughput: on the front
        (2, 200.0, 1500.0),  # on the front
        (3, 250.0, 1400.0),  # dominated by 2 (slower and less throughput)
        (4, 400.0, 2000.0),  # on the front
        (5, 400.0, 1900.0),  # dominated by 4 (same latency, less throughput)
        (6, None, 5000.0),  # no latency: never on the front, dominates nothing
        (7, float("nan"), 1.0),
    ]
    assert pareto_front(points, UP_DOWN) == {1, 2, 4}


def test_equal_points_do_not_dominate_each_other() -> None:
    assert not dominates((1.0, 2.0), (1.0, 2.0), UP_DOWN)
    assert dominates((1.0, 3.0), (1.0, 2.0), UP_DOWN)
    assert pareto_front([("a", 1.0, 2.0), ("b", 1.0, 2.0)], UP_DOWN) == {"a", "b"}
    # both axes higher-is-better (tokens per user vs tokens/s)
    pts = [("a", 10.0, 50.0), ("b", 20.0, 40.0), ("c", 9.0, 49.0)]
    assert pareto_front(pts, ("higher", "higher")) == {"a", "b"}


def test_tokens_per_user_is_the_inverse_of_mean_tpot() -> None:
    assert axis_value({"mean_tpot_ms": 20.0}, "tokens_per_user") == 50.0
    assert axis_value({"mean_tpot_ms": 0.0}, "tokens_per_user") is None
    assert axis_value({}, "tokens_per_user") is None
    assert axis_value({"output_throughput": 12.5}, "output_throughput") == 12.5


def test_knee_is_the_last_load_before_throughput_flattens_and_latency_climbs() -> None:
    # concurrency 1..32: throughput doubles up to 8, then +5 % per doubling; TTFT climbs after 8
    sweep = [
        (1, 100.0, 50.0),
        (2, 200.0, 51.0),
        (4, 390.0, 52.0),
        (8, 760.0, 55.0),
        (16, 800.0, 110.0),
        (32, 820.0, 230.0),
    ]
    found = knee(sweep)
    assert found is not None and found.value == 8
    assert "from 8 to 16" in found.why
    # the order of the points does not matter
    other = knee(list(reversed(sweep)))
    assert other is not None and other.value == 8


def test_no_knee_while_throughput_scales_or_latency_holds() -> None:
    scaling = [(1, 100.0, 50.0), (2, 190.0, 80.0), (4, 370.0, 120.0)]
    assert knee(scaling) is None  # throughput still ~proportional: the knee lies beyond
    flat_no_climb = [(1, 100.0, 50.0), (2, 101.0, 50.5), (4, 102.0, 51.0)]
    assert knee(flat_no_climb) is None  # flat but latency holds: a cap, not a knee
    assert knee([(4, 100.0, 10.0)]) is None
    assert knee([(0, 100.0, 10.0), (2, None, 10.0)]) is None
    # a throughput fall with latency up is saturated too
    fall = knee([(2, 100.0, 10.0), (4, 90.0, 30.0)])
    assert fall is not None and fall.value == 2


def test_front_sweep_agrees_with_the_pairwise_definition() -> None:
    """The one-sweep front is the definition's: no other point dominates (ties and repeats
    included, every direction pair)."""
    rng = random.Random(7)
    for better in (UP_DOWN, ("higher", "higher"), ("lower", "lower"), ("higher", "lower")):
        for _ in range(50):
            points = [(i, float(rng.randint(0, 6)), float(rng.randint(0, 6))) for i in range(30)]
            brute = {
                k
                for k, x, y in points
                if not any(dominates((a, b), (x, y), better) for _o, a, b in points)
            }
            assert pareto_front(points, better) == brute
