"""A search's decision, made once from its race (tuning.decide.search.race) and stored with its
result: what was chosen and how sure, JSON-ready, for `search show`, --json, the Searches page
and plans to read.

`outcome`:
- **chosen**: the leader meets the SLOs and was decided better than every rival it raced (Holm
  over the rivals at each look); `rival` is the closest one (the last dropped) with the interval
  of the choice against it, or the SLO it fails. A value that was the only one to give a usable
  result is chosen with its own interval and no rival.
- **tie**: the leader and the rivals left that meet the SLOs could not be told apart:
  `equivalent` (each within the margin of the leader) or `undecided` (the budget ended first).
  The tie-breaker picks `chosen`: vLLM's default when it is among them, else the smallest value
  (for the parameters a search takes, a smaller value never costs more memory: fewer sequences,
  a smaller batch, a smaller KV budget or block).
- **undecided**: no choice yet, said why: no value has 2 runs (tried once: no interval yet), the
  race raced one value alone while others were never repeated, or no contender is known to meet
  the SLOs (an interval straddles a limit). `leader` names the best so far; `next` what would
  decide it.
- **none**: no value gave a usable result, or every raced value fails the SLOs.

Nothing is `chosen` from one run: a value with one run is "tried once: no interval yet".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tuning.compare.catalog import Direction
from tuning.compare.sequential import Design
from tuning.compare.stats import Change, bootstrap_change, mean_interval
from tuning.decide.search.race import Look, Race, ValueRuns
from tuning.decide.search.slo import ONCE, SloState, slo_state

CHOSEN, TIE, UNDECIDED, NONE = "chosen", "tie", "undecided", "none"


def race_rule_text(design: Design) -> str:
    """The rule the race decided by, in words (its looks and the alpha each spends)."""
    looks = design.looks()
    return (
        f"race of the contenders with looks at {', '.join(map(str, looks))} runs a side, each "
        f"spending alpha / {len(looks)} of alpha {design.alpha:g} ("
        f"{design.look_confidence() * 100:.4g} % a look), split over the rivals by Holm's "
        "step-down; SLOs met when the interval of the mean p99 over the runs lies under the limit"
    )


@dataclass(frozen=True)
class Default:
    """vLLM's default of the searched parameter (the first tie-breaker), or why there is none."""

    value: Any
    source: str


def _pct(x: float | None) -> float | None:
    return None if x is None else x * 100


def change_json(change: Change, confidence: float) -> dict[str, Any]:
    """A change (the choice against its rival) as the record keeps it."""
    return {
        "verdict": change.verdict,
        "change_pct": _pct(change.rel_change),
        "interval_pct": None
        if change.rel_low is None or change.rel_high is None
        else [_pct(change.rel_low), _pct(change.rel_high)],
        "confidence": confidence,
        "runs_a_side": [change.n_base, change.n_cand],
        "more_runs": change.more.to_json()["runs"] if change.more else None,
    }


def versus(
    by_value: Mapping[float, ValueRuns],
    chosen: float,
    rival: float,
    look: Look,
    better: Direction,
    why: str,
) -> dict[str, Any]:
    """The choice against one rival at `look`: the same rule and confidence the race read the
    rival at, with the choice as the candidate (the rule is symmetric: the same verdict, read
    from the choice's side)."""
    n = look.runs
    confidence = look.rivals[rival].confidence
    change = bootstrap_change(
        by_value[rival].objective[:n],
        by_value[chosen].objective[:n],
        better,
        confidence=confidence,
    )
    return {"value": rival, "against": chosen, "why": why, **change_json(change, confidence)}


def _look_of(race: Race, value: float) -> Look | None:
    """The last look `value` was judged at."""
    return next((look for look in reversed(race.looks) if value in look.contenders), None)


def _value_row(
    v: ValueRuns, race: Race, slo_ms: Mapping[str, float], status: str
) -> dict[str, Any]:
    look = _look_of(race, v.value)
    slo: SloState = (
        look.slo[v.value] if look is not None and v.value in look.slo else slo_state(v.slo, slo_ms)
    )
    ci = mean_interval(v.objective)
    return {
        "value": v.value,
        "runs": v.n,
        "mean": sum(v.objective) / v.n if v.n else None,
        "interval": list(ci) if ci else None,
        "slo": slo.to_json(),
        "status": status,
    }


def _status(v: ValueRuns, race: Race) -> str:
    if not v.started:
        return "did not start"
    if v.failed_after == 0 or not v.n:
        return "measured nothing usable"
    for look in race.looks:
        if v.value in look.dropped:
            return f"dropped at {look.runs} runs: {look.dropped[v.value]}"
    if v.failed_after is not None:
        return "dropped: a later run measured nothing usable"
    if v.value in race.left:
        return "in the race"
    if v.value in race.entrants:
        return "raced"
    return ONCE if v.n == 1 else f"{v.n} runs, not raced"


def _same(value: Any, default: Any) -> bool:
    try:
        return float(value) == float(default)
    except (TypeError, ValueError):
        return False


def tie_break(tie: Sequence[Any], default: Default | None) -> tuple[Any, dict[str, str]]:
    """The tie's pick: vLLM's default when it is among them, else the smallest value."""
    if default is not None and default.value is not None:
        for value in tie:
            if _same(value, default.value):
                return value, {
                    "rule": "vLLM's default",
                    "text": f"vLLM's default ({default.source})",
                }
    pick = min(tie)
    return pick, {"rule": "less memory", "text": "the smaller value, which costs less memory"}


def _closest_dropped(
    race: Race, by_value: Mapping[float, ValueRuns], best: float, better: Direction
) -> dict[str, Any] | None:
    """The rival dropped last: by the objective (the choice against it at that look), else by
    the SLOs (the limit it fails)."""
    for look in reversed(race.looks):
        beaten = [v for v in look.dropped if v in look.rivals and v != best]
        if beaten and look.leader is not None:
            value = max(beaten, key=lambda v: look.means.get(v, float("-inf")))
            return versus(by_value, look.leader, value, look, better, "objective")
        failed = [v for v in look.dropped if v in look.slo and v != best]
        if failed:
            value = failed[0]
            return {"value": value, "why": "slo", "slo": look.slo[value].to_json()}
    return None


def _runner_up(race: Race, leader: Any) -> dict[str, Any] | None:
    """The best other value in the race's entry order (its closest rival so far)."""
    value = next((v for v in race.candidates if v != leader), None)
    return None if value is None else {"value": value, "why": "runner-up"}


def decide_search(
    race: Race,
    values: Sequence[ValueRuns],
    better: Direction,
    slo_ms: Mapping[str, float],
    default: Default | None = None,
) -> dict[str, Any]:
    """The decision (see the module docstring) as JSON-ready data; each value's row says where
    it ended (chosen, tied, dropped and why, tried once, ...)."""
    out = _decide(race, values, better, slo_ms, default)
    for row in out["values"]:
        if row["value"] == out["chosen"]:
            row["status"] = "chosen" if out["outcome"] == CHOSEN else "tied: the tie-breaker's pick"
        elif row["value"] in out["tie"]:
            row["status"] = "tied"
        elif row["value"] == out["leader"] and out["outcome"] == UNDECIDED:
            row["status"] = f"leads, undecided ({row['status']})"
    return out


def _decide(
    race: Race,
    values: Sequence[ValueRuns],
    better: Direction,
    slo_ms: Mapping[str, float],
    default: Default | None,
) -> dict[str, Any]:
    by_value = {v.value: v for v in values}
    sign = 1.0 if better == "higher" else -1.0
    out: dict[str, Any] = {
        "outcome": NONE,
        "chosen": None,
        "leader": None,
        "tie": [],
        "tie_kind": None,
        "tie_breaker": None,
        "rival": None,
        "open": [],
        "why": race.why,
        "next": None,
        "rule": race_rule_text(race.design),
        "alpha": race.design.alpha,
        "look_runs": list(race.design.looks()),
        "default": None if default is None else {"value": default.value, "source": default.source},
        "looks": [look.to_json() for look in race.looks],
        "race": {"entrants": list(race.entrants), "left": list(race.left)},
    }
    out["values"] = [_value_row(v, race, slo_ms, _status(v, race)) for v in values]
    if not race.candidates:
        out["why"] = "no value gave a usable result"
        return out
    if not race.looks:
        out.update(
            outcome=UNDECIDED,
            leader=race.candidates[0],
            rival=_runner_up(race, race.candidates[0]),
        )
        out["why"] = "no value has 2 runs (tried once: no interval yet)"
        out["next"] = "confirm the leader against its rival, or give the race runs (--budget-runs)"
        return out
    last = race.looks[-1]
    left = race.left
    if not left:
        out["why"] = "every raced value fails the SLOs or measured nothing usable"
        return out
    leader = last.leader
    if leader is None or leader not in left:
        out.update(outcome=UNDECIDED, leader=left[0], rival=_runner_up(race, left[0]))
        out["why"] = "the leader's later run measured nothing usable"
        return out
    feasible = [v for v in left if last.slo[v].feasible]
    out["leader"] = leader
    if not feasible:
        out.update(outcome=UNDECIDED, rival=_runner_up(race, leader))
        out["why"] = "no contender is known to meet the SLOs yet (an interval straddles a limit)"
        out["next"] = "more runs of the leader would decide its SLOs: confirm it"
        return out
    best = leader
    rivals = [v for v in left if v != best]
    tied = [v for v in rivals if last.slo[v].feasible]
    out["open"] = [
        {"value": v, "slo": last.slo[v].to_json(), "mean": last.means.get(v)}
        for v in rivals
        if v not in tied
    ]
    if tied:
        equivalent = all(last.rivals[v].change.verdict == "equivalent" for v in tied)
        closest = max(tied, key=lambda v: sign * last.means[v])
        raced = last.rivals[closest]
        pick, breaker = tie_break([best, *tied], default)
        out.update(
            outcome=TIE,
            chosen=pick,
            tie=sorted([best, *tied]),
            tie_kind="equivalent" if equivalent else "undecided",
            tie_breaker=breaker,
            rival=versus(by_value, best, closest, last, better, "objective"),
        )
        if not equivalent:
            more = raced.change.more
            said = more.text if more is not None else "more runs a side would decide it"
            out["next"] = f"{said}: confirm against the closest rival"
        return out
    if len(race.entrants) == 1 and len(race.candidates) > 1:
        out.update(outcome=UNDECIDED, rival=_runner_up(race, leader))
        out["why"] = "the race had runs for one value only: no rival was repeated"
        out["next"] = "confirm the leader against its rival, or give the race runs (--budget-runs)"
        return out
    if out["open"]:  # the best of those whose SLOs are undecided: it might beat the choice
        value = max((o["value"] for o in out["open"]), key=lambda v: sign * last.means[v])
        rival: dict[str, Any] | None = versus(by_value, best, value, last, better, "slo undecided")
    else:
        rival = _closest_dropped(race, by_value, best, better)
    out.update(outcome=CHOSEN, chosen=best, rival=rival)
    return out


def outcome_of(decision: Mapping[str, Any] | None) -> str:
    return str((decision or {}).get("outcome") or NONE)
