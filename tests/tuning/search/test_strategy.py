"""Issue 13, item 4: how the search picks values (tuning.decide.search.strategy): a coarse pass,
then
bisection around the best and on the start limit; integers stay integers; it stops on budget or
when the best value has no untried neighbour."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tuning.decide.search.strategy import Observation, Space, best, next_step, start_limit


def drive(
    space: Space, score: Callable[[float], float | None], budget: int, starts_below: float = 1e9
) -> tuple[list[Observation], str]:
    obs: list[Observation] = []
    while (step := next_step(space, obs, budget_runs=budget)).value is not None:
        v = step.value
        assert v not in {o.value for o in obs}, "a value twice"
        if space.integer:
            assert v == int(v)
        started = v < starts_below
        obs.append(Observation(v, score(v) if started else None, started))
    return obs, step.why


def test_coarse_points_are_spread_and_integer() -> None:
    assert Space(1, 32, True).coarse(4) == [1.0, 3.0, 10.0, 32.0]  # geometric over 32x
    assert Space(0, 12, True).coarse(4) == [0.0, 4.0, 8.0, 12.0]
    assert Space(0.5, 0.9, False).coarse(3) == pytest.approx([0.5, 0.7, 0.9])
    assert Space(1, 3, True).coarse(5) == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        Space(5, 5, True)


def test_a_unimodal_peak_is_found_with_half_a_grids_runs() -> None:
    space = Space(1, 32, True)
    peak = 12

    def tput(v: float) -> float:
        return 1000 - (v - peak) ** 2

    obs, why = drive(space, tput, budget=16)
    top = best(obs)
    assert top is not None and abs(top.value - peak) <= 1
    assert len(obs) <= 16  # a full grid over 1..32 is 32 runs
    assert "converged" in why or "budget" in why


def test_the_start_limit_is_found_by_bisection() -> None:
    """Larger is better until the engine refuses to start (KV too small for max-model-len)."""
    space = Space(256, 4096, True)
    limit = 1500  # values >= 1500 fail to start
    obs, _ = drive(space, lambda v: v, budget=16, starts_below=limit)
    top = best(obs)
    assert top is not None and top.value < limit
    failed = min(o.value for o in obs if not o.started)
    assert failed >= limit and failed - top.value <= 1  # within one step of the true boundary


def test_nothing_usable_and_budget_stop() -> None:
    space = Space(1, 8, True)
    obs, why = drive(space, lambda v: None, budget=10)
    assert best(obs) is None and why == "no value gave a usable result" and len(obs) == 4
    obs, why = drive(space, lambda v: v, budget=2)
    assert len(obs) == 2 and "budget" in why


def test_the_start_limit_is_bisected_even_when_a_smaller_value_scores_best() -> None:
    """max-model-len against a small KV budget: throughput is flat (noise decides which value
    scores best), yet the search still bisects to the largest value that starts."""
    space = Space(256, 4096, True)
    limit = 1025  # the engine refuses max-model-len above its 1,024 KV tokens
    noise = {256.0: 5.0}  # the smallest value happens to score best

    obs, _ = drive(space, lambda v: noise.get(v, 1.0), budget=20, starts_below=limit)
    assert start_limit(obs) == (1024.0, 1025.0)
    top = best(obs)
    assert top is not None and top.value == 256.0  # the choice is still the best score
    assert start_limit([Observation(8.0, 1.0)]) is None
    assert start_limit([Observation(8.0, None, started=False)]) == (None, 8.0)
