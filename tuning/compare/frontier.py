"""Trade-offs read off stored numbers: the Pareto front of one workload's runs and the knee of a
sweep. Pure functions over numbers (no store, no Altair), so the charts, the CLI and the pages
show the same answer and the tests check it alone.

Pareto: a run *dominates* another when it is at least as good on both axes and strictly better on
one (better = the axis's direction: higher throughput, lower latency). The front is the set of
runs no other run dominates: for each, no run does better on one axis without doing worse on the
other. Two runs with the same numbers do not dominate each other.

Tokens/s per user is `1000 / mean TPOT (ms)`: the decode speed one request sees (the
"interactivity" axis of vLLM's and InferenceMAX's throughput-vs-interactivity plots).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparison import Comparison, _finite

Direction = Literal["higher", "lower"]
K = TypeVar("K", bound=Hashable)

# A knee step: throughput grew by less than FLAT of what proportional scaling gives ...
FLAT = 0.25
# ... while the latency rose by more than CLIMB (a share of its value one step lower).
CLIMB = 0.10


@dataclass(frozen=True)
class Axis:
    key: str
    label: str
    unit: str
    better: Direction


AXES: dict[str, Axis] = {
    "output_throughput": Axis("output_throughput", "output throughput", "tok/s", "higher"),
    "p99_ttft_ms": Axis("p99_ttft_ms", "p99 TTFT", "ms", "lower"),
    "tokens_per_user": Axis("tokens_per_user", "tokens/s per user", "tok/s/user", "higher"),
}
# view -> (x axis, y axis): "output throughput vs p99 TTFT", "tokens/s per user vs tokens/s".
PARETO_VIEWS: dict[str, tuple[str, str]] = {
    "ttft": ("p99_ttft_ms", "output_throughput"),
    "per_user": ("output_throughput", "tokens_per_user"),
}


# The run columns the axes read (tokens per user from mean TPOT).
AXIS_COLUMNS = ("output_throughput", "p99_ttft_ms", "mean_tpot_ms")


def axis_value(run: Mapping[str, Any], key: str) -> float | None:
    """One run's number on an axis (tokens per user derived from its mean TPOT); None: none."""
    if key == "tokens_per_user":
        tpot = _finite(run.get("mean_tpot_ms"))
        return 1000.0 / tpot if tpot and tpot > 0 else None
    return _finite(run.get(key))


def _at_least_as_good(a: float, b: float, better: Direction) -> bool:
    return a >= b if better == "higher" else a <= b


def dominates(
    a: tuple[float, float], b: tuple[float, float], better: tuple[Direction, Direction]
) -> bool:
    """Is point a at least as good as b on both axes and strictly better on one?"""
    if a == b:
        return False
    return all(_at_least_as_good(x, y, d) for x, y, d in zip(a, b, better, strict=True))


def pareto_front(
    points: Sequence[tuple[K, float | None, float | None]], better: tuple[Direction, Direction]
) -> set[K]:
    """The keys of the non-dominated points among (key, x, y). A point missing a coordinate (None
    or not finite) is never on the front and dominates nothing.

    One sweep after a sort (a lab's workload may have 10,000 runs; comparing every pair is 10^8
    steps): with both axes turned to higher-is-better, walk the distinct x from best to worst;
    a point is dominated when a point of better x has a y at least as good, or a point of its
    own x has a better y (equal points do not dominate each other)."""
    sign = tuple(1.0 if d == "higher" else -1.0 for d in better)
    by_x: dict[float, list[tuple[K, float]]] = {}
    for k, x, y in points:
        fx, fy = _finite(x), _finite(y)
        if fx is not None and fy is not None:
            by_x.setdefault(sign[0] * fx, []).append((k, sign[1] * fy))
    front: set[K] = set()
    best_y = -math.inf  # the best y among points of a better x
    for x in sorted(by_x, reverse=True):
        group = by_x[x]
        top = max(y for _k, y in group)
        if top > best_y:
            front.update(k for k, y in group if y == top)
        best_y = max(best_y, top)
    return front


@dataclass(frozen=True)
class Knee:
    value: float
    why: str


def knee(
    points: Sequence[tuple[float, float | None, float | None]],
    *,
    flat: float = FLAT,
    climb: float = CLIMB,
) -> Knee | None:
    """The knee of a load sweep (concurrency, request rate; also max-num-seqs and other caps):
    the largest load before which throughput still grows, after which more load only adds latency.

    Precisely, over points (value x, mean throughput T, mean latency L), dropping those without
    both numbers or with x <= 0, sorted by x: for each step x_i -> x_i+1 the load grows by
    r = x_i+1 / x_i - 1, the throughput by g = T_i+1 / T_i - 1 and the latency by
    l = L_i+1 / L_i - 1. The step is *saturated* when g < flat * r (throughput grew by less than
    `flat`, a quarter, of what scaling in proportion to the load would give; a fall counts) and
    l > climb (latency rose by more than `climb`, 10 %). The knee is x_i of the first saturated
    step. None with under two points or no saturated step (the knee lies beyond the range).
    """
    usable = sorted(
        (x, t, lat)
        for x, t_raw, l_raw in points
        if (t := _finite(t_raw)) is not None
        and (lat := _finite(l_raw)) is not None
        and x > 0
        and t > 0
        and lat > 0
    )
    for (x0, t0, l0), (x1, t1, l1) in zip(usable, usable[1:], strict=False):
        if x1 <= x0:
            continue
        r, g, lat = x1 / x0 - 1, t1 / t0 - 1, l1 / l0 - 1
        if g < flat * r and lat > climb:
            return Knee(
                x0,
                f"from {x0:g} to {x1:g} the load grows {r:+.0%} but throughput {g:+.0%} "
                f"while latency {lat:+.0%}",
            )
    return None


def knee_keys(objective: str) -> tuple[str, str]:
    """(throughput key, latency key) drawn beside each other for an objective."""
    metric = METRIC_BY_KEY.get(objective)
    if metric is not None and metric.better == "lower":
        return "output_throughput", objective
    if objective in METRIC_BY_KEY and objective != "output_throughput":
        return objective, "p99_ttft_ms"
    return "output_throughput", "p99_ttft_ms"


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def side_knee(comparison: Comparison, keys: tuple[str, str]) -> Knee | None:
    """The knee  over the sides' means of a numeric parameter."""
    points = []
    for side in comparison.sides:
        x = _number(side.value)
        if x is not None:
            points.append((x, side.stats(keys[0])["mean"], side.stats(keys[1])["mean"]))
    return knee(points)
