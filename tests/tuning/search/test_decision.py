"""Issue 37 item 4: a search's decision (tuning.decide.search.decision) is a choice with its
interval against the closest rival, a tie named as one with its tie-breaker (vLLM's default,
else the smaller value), or undecided with what keeps it so; never a choice from one run. And
the confirm's verdict settles it (tuning.decide.search.choice)."""

from __future__ import annotations

from typing import Any

from tuning.decide.search.choice import choice
from tuning.decide.search.decision import Default, decide_search
from tuning.decide.search.race import ValueRuns, plan_race


def _decide(
    values: list[ValueRuns],
    slo: dict[str, float] | None = None,
    default: Default | None = None,
    race_runs: int = 12,
) -> dict[str, Any]:
    race = plan_race(values, "higher", slo or {}, race_runs=race_runs, budget_left=0)
    return decide_search(race, values, "higher", slo or {}, default)


SAME = (1000.0, 1003.0, 998.0)
SAME2 = (1001.0, 999.0, 1002.0)


def test_a_tie_names_its_tie_breaker_vllms_default_first() -> None:
    values = [ValueRuns(256.0, SAME), ValueRuns(512.0, SAME2)]
    tie = _decide(values, default=Default(512, "vLLM 0.25.0's parser"))
    assert tie["outcome"] == "tie" and tie["tie"] == [256.0, 512.0]
    assert tie["chosen"] == 512.0 and tie["tie_breaker"]["rule"] == "vLLM's default"
    assert "vLLM 0.25.0's parser" in tie["tie_breaker"]["text"]
    assert tie["default"] == {"value": 512, "source": "vLLM 0.25.0's parser"}
    other = _decide(values, default=Default(128, "the lab's table"))  # not among them
    assert other["chosen"] == 256.0 and other["tie_breaker"]["rule"] == "less memory"
    assert other["rival"]["interval_pct"] is not None and other["rival"]["runs_a_side"] == [3, 3]


def test_a_choice_comes_with_its_interval_against_the_closest_rival() -> None:
    values = [
        ValueRuns(1.0, (500.0, 505.0, 495.0)),
        ValueRuns(2.0, (900.0, 905.0, 895.0)),
        ValueRuns(4.0, (1000.0, 1004.0, 996.0)),
    ]
    found = _decide(values)
    assert found["outcome"] == "chosen" and found["chosen"] == 4.0
    rival = found["rival"]
    assert rival["value"] == 2.0 and rival["against"] == 4.0 and rival["verdict"] == "better"
    assert rival["interval_pct"][0] > 0 and rival["confidence"] > 0.95
    status = {r["value"]: r["status"] for r in found["values"]}
    assert status[1.0].startswith("dropped at 2 runs: worse than 4 at 2 runs a side (")
    assert "Holm" in status[1.0] and status[2.0].startswith("dropped at")
    assert status[4.0] == "chosen"


def test_one_run_a_value_chooses_nothing() -> None:
    values = [ValueRuns(1.0, (500.0,)), ValueRuns(4.0, (1000.0,))]
    found = _decide(values, race_runs=0)
    assert found["outcome"] == "undecided" and found["chosen"] is None
    assert found["leader"] == 4.0 and found["rival"]["value"] == 1.0
    assert "tried once" in found["why"]
    assert [r["status"] for r in found["values"]] == ["tried once", "leads, undecided (tried once)"]


def test_a_leader_whose_slo_is_undecided_is_no_choice() -> None:
    values = [
        ValueRuns(4.0, (1000.0, 1002.0, 998.0), {"tpot": (19.0, 21.5, 20.5)}),
        ValueRuns(8.0, (1500.0, 1502.0, 1498.0), {"tpot": (30.0, 31.0, 30.5)}),
    ]
    found = _decide(values, slo={"tpot": 20.0})
    assert found["outcome"] == "undecided" and found["chosen"] is None
    assert found["leader"] == 4.0 and "SLOs" in found["why"]


def _decision(**over: Any) -> dict[str, Any]:
    base = {
        "outcome": "tie",
        "chosen": 256,
        "leader": 512,
        "tie": [256, 512],
        "tie_kind": "undecided",
        "tie_breaker": {"rule": "less memory", "text": "the smaller value"},
        "rival": {"value": 256},
        "default": None,
    }
    return {**base, **over}


def _confirm(verdict: str, slo: dict[str, Any] | None = None, other: int = 256) -> dict[str, Any]:
    return {"chosen": 512, "other": other, "verdict": verdict, "slo": slo}


def test_the_confirm_settles_the_choice() -> None:
    assert choice(_decision(), None)["source"] == "search"
    better = choice(_decision(), _confirm("better"))
    assert (better["outcome"], better["chosen"], better["source"]) == ("chosen", 512, "confirm")
    worse = choice(_decision(), _confirm("worse"))
    assert (worse["outcome"], worse["chosen"]) == ("chosen", 256)
    tie = choice(_decision(default={"value": 512, "source": "x"}), _confirm("undecided"))
    assert tie["outcome"] == "tie" and tie["tie"] == [256, 512] and tie["chosen"] == 512
    assert tie["tie_kind"] == "undecided" and tie["tie_breaker"]["rule"] == "vLLM's default"
    waiting = choice(_decision(), {**_confirm("not run yet")})
    assert waiting["source"] == "search" and waiting["outcome"] == "tie"
    baseline = choice(_decision(), _confirm("better", other=16))  # not a rival: the gain only
    assert baseline["source"] == "search"


def test_the_confirms_slos_are_judged_on_their_interval() -> None:
    met, failed, undecided = ({"state": s} for s in ("met", "failed", "undecided"))
    lost = choice(_decision(), _confirm("better", {"chosen": failed, "other": met}))
    assert (lost["outcome"], lost["chosen"]) == ("chosen", 256)
    open_ = choice(_decision(), _confirm("better", {"chosen": undecided, "other": met}))
    assert open_["outcome"] == "undecided" and open_["chosen"] is None
    assert "undecided" in open_["why"]
    one = choice(_decision(), _confirm("undecided", {"chosen": undecided, "other": met}))
    assert one["outcome"] == "tie" and one["chosen"] == 256
    assert one["tie_breaker"]["text"] == "the only one known to meet the SLOs"
