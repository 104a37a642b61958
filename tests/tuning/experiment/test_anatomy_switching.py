"""Issue 38, items 1 and 4: the per-experiment line of where the time went names switching
whenever its repeats switched resident servers, however little it took ("<0.1 switching" in a
9 min experiment of 0.13 s switches); before, a part that rounded to 0.0 was left out, and a
resident experiment's line read as if it had done no switching at all."""

from __future__ import annotations

from typing import Any

from tuning.experiment.run_anatomy import RunClock, time_spent_line
from tuning.experiment.time_spent import experiment_anatomy


def _run(switch_s: float | None, start_s: float, load_s: float) -> dict[str, Any]:
    """A run's anatomy as the runner stores it: a switch (a woken server) or a start, its load."""
    clock = RunClock(0.0, "between")
    t = 1.0
    clock.mark("switch" if switch_s is not None else "start", at=t)
    t += switch_s if switch_s is not None else start_s
    clock.mark("load", at=t)
    clock.mark("storing", at=t + load_s)
    return {"anatomy": clock.close(at=t + load_s + 1.0)}


def test_an_experiment_that_switched_names_its_switching_in_minutes() -> None:
    runs = [_run(None, 120.0, 60.0), _run(0.13, 0.0, 60.0), _run(0.13, 0.0, 60.0)]
    runs += [_run(None, 120.0, 60.0), _run(0.13, 0.0, 60.0), _run(0.13, 0.0, 60.0)]
    anat = experiment_anatomy({"id": 1}, runs)
    assert anat is not None
    assert anat["groups"]["switching"] == 0.52
    assert (
        anat["line"] == "10.2 min: 6.0 load, 4.0 starting, 0.1 other, 0.1 storing, <0.1 switching"
    )


def test_switching_in_seconds_and_none_when_there_was_none() -> None:
    assert time_spent_line({"load": 30.0, "switching": 0.8}) == "30.8 s: 30.0 load, 0.8 switching"
    # other parts that round to nothing are still left out; no switching: not named
    assert "stopping" not in time_spent_line({"load": 600.0, "stopping": 0.5})
    assert "switching" not in time_spent_line({"load": 600.0, "switching": 0.0})
