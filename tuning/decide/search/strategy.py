"""Which value to try next when searching one parameter over a range: a pure function of what was
measured so far, so a stopped search resumes from the store alone.

1. Coarse pass: `coarse` points spread over [lo, hi] (both ends included; geometric for an integer
   range spanning 16x or more, e.g. max-num-seqs 1..256; integers stay integers, no value twice).
2. Start limit: when some values failed to start, bisect between the largest value that started
   below the smallest failure and that failure, until they are adjacent: the largest value that
   starts (`start_limit`). This comes before refinement whichever value scores best: a parameter
   whose large values fail to start (max-model-len, gpu-memory-utilization, a KV budget) often
   scores alike on either side of a few restarts' noise, and the boundary is what the user asked.
3. Refinement: bisect between the best value and its better neighbour, then the other neighbour,
   until the best value's neighbours are adjacent (integers) or `tolerance` apart (floats).
4. Stop when the budget of runs is spent.
A value's score is its objective, sign-flipped when lower is better; a value that failed to start,
measured nothing, or broke an SLO has no score (it is never the best).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tuning.engine.value_text import format_value


@dataclass(frozen=True)
class Space:
    """The searched range of one parameter."""

    lo: float
    hi: float
    integer: bool

    def __post_init__(self) -> None:
        if not self.lo < self.hi:
            raise ValueError(f"range {self.lo:g}:{self.hi:g}: LO must be below HI")

    @property
    def tolerance(self) -> float:
        """Floats stop refining at 1/64 of the range; integers at adjacent values."""
        return 1.0 if self.integer else (self.hi - self.lo) / 64.0

    def snap(self, value: float) -> float:
        return float(round(value)) if self.integer else value

    def coarse(self, points: int) -> list[float]:
        points = max(2, points)
        if self.integer and self.lo >= 1 and self.hi / self.lo >= 16:
            ratio = (self.hi / self.lo) ** (1 / (points - 1))
            raw = [self.lo * ratio**i for i in range(points)]
        else:
            raw = [self.lo + (self.hi - self.lo) * i / (points - 1) for i in range(points)]
        out: list[float] = []
        for value in (self.snap(v) for v in raw):
            if value not in out:
                out.append(value)
        return out

    def between(self, a: float, b: float) -> float | None:
        """A value strictly between a and b (their middle), None when they are close enough."""
        lo, hi = min(a, b), max(a, b)
        if hi - lo <= self.tolerance:
            return None
        mid = self.snap((lo + hi) / 2)
        if self.integer and self.lo >= 1 and hi / lo >= 4:  # geometric middle on a wide range
            mid = self.snap(math.sqrt(lo * hi))
        return mid if lo < mid < hi else None


@dataclass(frozen=True)
class Observation:
    """One measured value: `score` (higher is better; None: no usable result), `started`."""

    value: float
    score: float | None
    started: bool = True


@dataclass(frozen=True)
class Step:
    value: float | None  # None: stop
    why: str


def best(observations: Sequence[Observation]) -> Observation | None:
    """The value with the highest score (the smaller value on a tie: fewer resources)."""
    scored = [o for o in observations if o.score is not None]
    if not scored:
        return None
    return max(scored, key=lambda o: (o.score, -o.value))


def start_limit(observations: Sequence[Observation]) -> tuple[float | None, float] | None:
    """(the largest value that started below the smallest failure to start, that failure); None
    when every value started. The first is None when nothing below the failure started."""
    failed = [o.value for o in observations if not o.started]
    if not failed:
        return None
    lowest = min(failed)
    below = [o.value for o in observations if o.started and o.value < lowest]
    return (max(below) if below else None), lowest


def next_step(
    space: Space, observations: Sequence[Observation], *, budget_runs: int, coarse: int = 4
) -> Step:
    """The next value to run and why, or a stop with the reason."""
    seen = {o.value for o in observations}
    if len(observations) >= budget_runs:
        return Step(None, f"the budget of {budget_runs} runs is spent")
    grid = space.coarse(coarse)
    todo = [v for v in grid if v not in seen]
    if todo:
        return Step(todo[0], f"coarse pass: {len(grid) - len(todo) + 1} of {len(grid)}")
    top = best(observations)
    if top is None:
        return Step(None, "no value gave a usable result")
    values = sorted(seen)
    limit = start_limit(observations)
    if limit is not None and limit[0] is not None:
        mid = space.between(limit[0], limit[1])
        if mid is not None and mid not in seen:
            return Step(
                mid,
                f"start limit: {_num(limit[0])} starts and {_num(limit[1])} does not; "
                "bisect for the largest value that starts",
            )
    i = values.index(top.value)
    by_value = {o.value: o for o in observations}
    neighbours = [values[j] for j in (i - 1, i + 1) if 0 <= j < len(values)]

    def score_of(v: float) -> float:
        s = by_value[v].score
        return -math.inf if s is None else s

    for other in sorted(neighbours, key=score_of, reverse=True):
        mid = space.between(top.value, other)
        if mid is not None and mid not in seen:
            return Step(
                mid,
                f"refine: between the best so far {_num(top.value)} and its neighbour "
                f"{_num(other)}",
            )
    return Step(None, f"converged: the best value {_num(top.value)} has no untried neighbour")


def _num(value: float) -> str:
    return format_value(value)
