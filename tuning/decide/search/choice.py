"""A search's choice as every surface states it: the search's decision
(tuning.decide.search.decision), settled by its confirming experiment once that has a verdict
(tuning.decide.search.confirm). `search show`, its --json (`choice`) and the Searches page read
this one function, so a confirm's result is part of the choice wherever it is shown.

A confirm of the search's leader against its closest rival (or another value of its tie) decides
the choice: better -> the leader, confirmed; worse -> the rival (the confirm overturned the
search); equivalent or undecided -> a tie of the two, named, with its tie-breaker (vLLM's
default, else the smaller value). A side whose SLOs the confirm's runs fail (their interval over
the limit) is not chosen. A confirm against the baseline value leaves the choice as it is and
adds the gain over the baseline. A confirm not run yet (queued, running) leaves the search's
decision, and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuning.decide.search.decision import CHOSEN, NONE, TIE, UNDECIDED, Default, tie_break
from tuning.decide.search.slo import FAILED, MET

DECIDES = ("better", "worse", "equivalent", "undecided")


def settles(decision: Mapping[str, Any], confirm: Mapping[str, Any] | None) -> bool:
    """Does this confirm decide the choice (its pair is the leader and a raced rival or tie
    member) and has it a verdict yet?"""
    if not confirm or confirm.get("verdict") not in DECIDES:
        return False
    mine = {decision.get("chosen"), decision.get("leader")} - {None}
    others = {(decision.get("rival") or {}).get("value"), *(decision.get("tie") or [])} - {None}
    return confirm["chosen"] in mine and confirm["other"] in others | mine


def _slo(confirm: Mapping[str, Any], side: str) -> str | None:
    """A side's SLO state over the confirm's runs (None: the search has no SLOs)."""
    found = (confirm.get("slo") or {}).get(side)
    return None if not found else str(found.get("state"))


def choice(decision: Mapping[str, Any], confirm: Mapping[str, Any] | None) -> dict[str, Any]:
    """{'outcome', 'chosen', 'leader', 'tie', 'tie_kind', 'tie_breaker', 'source', 'why'}: the
    search's own decision, or the confirm's where it settles it (see the module docstring). A
    side the confirm's runs show failing the SLOs loses; a winner whose SLOs the confirm's runs
    leave undecided is no choice yet."""
    keep = ("outcome", "chosen", "leader", "tie", "tie_kind", "tie_breaker", "why")
    out = {k: decision.get(k) for k in keep}
    out["source"] = "search"
    if confirm is None or not settles(decision, confirm):
        return out
    side = {"chosen": confirm["chosen"], "other": confirm["other"]}
    state = {k: _slo(confirm, k) for k in side}
    ok = {k for k in side if state[k] in (None, MET)}  # known to meet the SLOs (or none)
    alive = [k for k in side if state[k] != FAILED]
    out.update(source="confirm", tie=[], tie_kind=None, tie_breaker=None, why="")
    verdict = confirm["verdict"]
    winner = {"better": "chosen", "worse": "other"}.get(verdict)
    if not alive:
        return {**out, "outcome": NONE, "chosen": None, "why": "both fail the SLOs"}
    if winner is None or winner not in alive:  # a tie of the objective, or the winner failed
        members = [k for k in alive if k in ok]
        if len(alive) == 1 and alive[0] in ok:
            return {**out, "outcome": CHOSEN, "chosen": side[alive[0]], "leader": side[alive[0]]}
        if not members:
            leader = side[alive[0]]
            why = "the SLOs are undecided over the confirm's runs"
            return {**out, "outcome": UNDECIDED, "chosen": None, "leader": leader, "why": why}
        raw = decision.get("default") or {}
        default = Default(raw.get("value"), str(raw.get("source") or "")) if raw else None
        tie = sorted(side.values())
        pick, breaker = tie_break(sorted(side[k] for k in members), default)
        if len(members) == 1:
            breaker = {"rule": "slo", "text": "the only one known to meet the SLOs"}
        kind = "equivalent" if verdict == "equivalent" else UNDECIDED
        return {
            **out,
            "outcome": TIE,
            "chosen": pick,
            "leader": side["chosen"],
            "tie": tie,
            "tie_kind": kind,
            "tie_breaker": breaker,
        }
    if winner not in ok:
        why = f"{side[winner]} wins on the objective, but its SLOs are undecided over its runs"
        return {**out, "outcome": UNDECIDED, "chosen": None, "leader": side[winner], "why": why}
    return {**out, "outcome": CHOSEN, "chosen": side[winner], "leader": side[winner]}
