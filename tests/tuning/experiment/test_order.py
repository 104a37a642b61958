"""Issue 25, item 5: repeats run counterbalanced (A B | B A | A B ...), so a linear drift of the
machine cancels between values; the order is one function, continued by `--repeats auto`, and a
resume matches the stored (value, repeat) pairs, whatever order they were stored in."""

from __future__ import annotations

from typing import Any

from tuning.experiment.order import counterbalanced, round_order
from tuning.experiment.outcome import remaining


def test_repeats_run_a_b_b_a() -> None:
    assert counterbalanced([2, 16], 4) == [
        (2, 0), (16, 0), (16, 1), (2, 1), (2, 2), (16, 2), (16, 3), (2, 3),
    ]  # fmt: skip
    assert [v for v, _ in counterbalanced(["a", "b", "c"], 2)] == ["a", "b", "c", "c", "b", "a"]
    assert round_order(["a", "b", "c"], 3) == ["c", "b", "a"]
    assert counterbalanced([7], 0) == [(7, 0)]  # at least one round


def test_a_linear_drift_cancels_over_each_pair_of_rounds() -> None:
    for values in ([1, 2], [1, 2, 3]):
        plan = counterbalanced(values, 4)
        # the mean position (time) of each value's runs: the same for every value
        mean_at = {v: sum(i for i, (x, _) in enumerate(plan) if x == v) / 4 for v in values}
        assert len(set(mean_at.values())) == 1, mean_at


def test_a_schedule_continues_with_the_right_parity() -> None:
    whole = counterbalanced(["a", "b"], 5)
    assert counterbalanced(["a", "b"], 2) + counterbalanced(["a", "b"], 3, first_round=2) == whole
    assert counterbalanced(["a", "b"], 1, first_round=3) == [("b", 3), ("a", 3)]


def _run(value: str, repeat: int, seq: int, status: str = "done", **extra: Any) -> dict[str, Any]:
    return {"value": value, "repeat_index": repeat, "seq": seq, "status": status, **extra}


def test_resume_matches_value_and_repeat_not_the_position() -> None:
    plan = counterbalanced([2, 16], 2)  # (2,0) (16,0) (16,1) (2,1)
    # stored in the old A B A B order and stopped after three runs: 2/0, 16/0, 2/1
    old_order = [_run("2", 0, 0), _run("16", 0, 1), _run("2", 1, 2)]
    assert remaining(plan, old_order) == [2]  # only 16/1 is missing
    # a lab failure is run again; a failure of the configuration is a result
    lost = [*old_order, _run("16", 1, 3, "failed", failure_kind="runner_died")]
    assert remaining(plan, lost) == [2]
    kept = [*old_order, _run("16", 1, 3, "failed", failure_kind="oom")]
    assert remaining(plan, kept) == []
    assert remaining(plan, []) == [0, 1, 2, 3]
    floats = counterbalanced([0.5, 0.9], 1)  # values compare as the runs store them (format_value)
    assert remaining(floats, [_run("0.9", 0, 1)]) == [0]


def test_close_floats_resume_as_two_values() -> None:
    """Issue 41 case 5: 0.9000001 and 0.9000002 were stored under one label ("0.9"), so a resume
    after only the second one ran counted its run for the first, ran the second again and never
    measured the first."""
    from tuning.engine.params import format_value

    plan = counterbalanced([0.9000001, 0.9000002], 1)
    stored = [_run(format_value(0.9000002), 0, 1)]  # as run_unit stores the run's value
    assert remaining(plan, stored) == [0]
