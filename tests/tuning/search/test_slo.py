"""Issue 37 item 4: a value meets an SLO when the interval of its per-run p99 over its repeats
lies under the limit, fails it when the interval lies above, and is undecided otherwise; one run
is "tried once" (no interval), never met and never failed (tuning.decide.search.slo)."""

from __future__ import annotations

from tuning.compare.stats import mean_interval
from tuning.decide.search.slo import FAILED, MET, NO_SLO, ONCE, UNDECIDED, slo_state, under_limits

FIVE_OF_SIX = [14.1, 13.8, 14.3, 13.9, 14.2, 20.4]  # p99 TPOT (ms): the last run over 20 ms


def test_an_slo_met_by_five_of_six_runs_is_judged_on_the_interval_not_the_last_run() -> None:
    last = {"p99_tpot_ms": FIVE_OF_SIX[-1]}
    assert under_limits(last, {"tpot": 20.0}) is False  # run by run, the last one breaks it
    state = slo_state({"tpot": FIVE_OF_SIX}, {"tpot": 20.0})
    (check,) = state.checks
    assert state.state == MET and state.feasible and check.runs == 6
    assert (check.low, check.high) == mean_interval(FIVE_OF_SIX)
    assert check.high is not None and check.high < 20.0


def test_one_run_over_the_limit_rules_nothing_out() -> None:
    state = slo_state({"tpot": [22.1]}, {"tpot": 20.0})
    assert state.state == ONCE and state.possible and not state.feasible
    assert state.checks[0].low is None and state.checks[0].mean == 22.1


def test_an_interval_that_straddles_the_limit_is_undecided_and_one_above_it_fails() -> None:
    straddles = slo_state({"tpot": [22.1, 18.0, 21.0]}, {"tpot": 20.0})
    assert straddles.state == UNDECIDED and straddles.possible
    above = slo_state({"tpot": [22.0, 23.0, 22.5]}, {"tpot": 20.0})
    assert above.state == FAILED and not above.possible
    assert slo_state({}, {}).state == NO_SLO and slo_state({}, {}).feasible


def test_failing_one_of_several_slos_is_judged_at_the_split_alpha() -> None:
    """A union of "failed" claims: with two SLOs each is read at 97.5 %, so a limit between the
    95 % and the 97.5 % lower bounds fails alone and is undecided beside a second SLO."""
    tpot = [21.0, 22.0, 23.0]
    lo95, lo975 = mean_interval(tpot)[0], mean_interval(tpot, 0.975)[0]  # type: ignore[index]
    limit = (lo95 + lo975) / 2
    assert slo_state({"tpot": tpot}, {"tpot": limit}).state == FAILED
    both = slo_state({"tpot": tpot, "ttft": [10.0, 11.0, 10.5]}, {"tpot": limit, "ttft": 500.0})
    assert both.state == UNDECIDED, both
    assert [c.state for c in both.checks] == [UNDECIDED, MET]
