"""What an experiment did about resident engines (issue 38, item 4), in a user's words: whether
its repeats switched resident servers (switches, starts), the stored check of switched against
restarted runs (equivalent, differs, undecided, with its numbers) and any fall back to restarts
with its reason; and the note its verdict carries when it fell back or its check differs.

A CPU vLLM's resident servers are paused, not put to sleep (`resident_json.parked`: "paused"
or "asleep", tuning.experiment.resident): the words say which.

One place for these words: `experiment` and `compare` (text and --json), the Compare and Live
pages, the HTML report and the decision record read them here, from what the runner stored
(`experiments.resident_json`, tuning.experiment.resident and resident_check).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.units import fmt
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.present import pct_number

# Reasons that need no saying: nothing to switch at all (stored all the same).
NO_RESTARTS = "its runs do not restart a server"
NO_REPEATS = "one run a value has no repeats to switch"
QUIET = (NO_RESTARTS, NO_REPEATS)

CHECK_MEANING = {
    "equivalent": "switched and restarted runs give equivalent numbers on this machine",
    "differs": "switched runs differ from restarted ones",
    "undecided": "too few runs a side to say yet",
}


def _pct(low: Any, high: Any) -> str:
    if isinstance(low, int | float) and isinstance(high, int | float):
        return f"{pct_number(low * 100)} % .. {pct_number(high * 100)} %"
    return ""


def _metric_words(key: str, m: Mapping[str, Any]) -> str:
    """'output throughput 1,234 restarted vs 1,240 switched (-0.3 % .. +1.1 %, equivalent)'."""
    metric = METRIC_BY_KEY.get(key)
    label, unit = (metric.label, metric.unit) if metric else (key, "")
    base, cand = fmt(m.get("restarted_mean"), unit), fmt(m.get("switched_mean"), unit)
    inside = ", ".join(
        t for t in (_pct(m.get("rel_low"), m.get("rel_high")), m.get("verdict")) if t
    )
    return f"{label} {base} restarted vs {cand} switched" + (f" ({inside})" if inside else "")


def check_line(result: Mapping[str, Any] | None) -> str:
    """The stored check in one line with its numbers: each value's runs a side and, per primary
    metric, the restarted and switched means, the interval of the change and its verdict."""
    if not result:
        return ""
    verdict = str(result.get("verdict") or "undecided")
    head = f"resident check: {verdict} ({CHECK_MEANING.get(verdict, verdict)})"
    sides = []
    for label, v in (result.get("values") or {}).items():
        if not isinstance(v, Mapping):
            continue
        runs = f"{v.get('restarted_runs', 0)} restarted, {v.get('switched_runs', 0)} switched"
        metrics = v.get("metrics") or {}
        said = [_metric_words(k, m) for k, m in metrics.items() if isinstance(m, Mapping)]
        sides.append(f"value {label}: {runs}" + (f"; {'; '.join(said)}" if said else ""))
    if not sides and result.get("why"):
        head += f": {result['why']}"
    return head + (f": {'. '.join(sides)}" if sides else "")


def paused(state: Mapping[str, Any]) -> bool:
    """Whether its resident servers were paused (a CPU vLLM) rather than put to sleep."""
    return state.get("parked") == "paused"


def switch_line(state: Mapping[str, Any]) -> str:
    """'resident engines: 6 switches, 4 starts (a switch: the server in hand put to sleep and the
    value's woken, instead of a restart; a real restart every 3 rounds)'; on a CPU vLLM the server
    in hand is paused and the value's continued."""
    switches, starts = int(state.get("switches") or 0), int(state.get("starts") or 0)
    every = state.get("restart_every")
    tail = f"; a real restart every {every} rounds" if every else ""
    how = (
        "paused (no CPU used, its RAM kept) and the value's continued"
        if paused(state)
        else "put to sleep and the value's woken"
    )
    return (
        f"resident engines: {switches} switches, {starts} starts (a switch: the server in hand "
        f"{how}, instead of a restart{tail})"
    )


def fallback_line(state: Mapping[str, Any]) -> str:
    why = state.get("fallback")
    return f"resident engines fell back to restarts: {why}" if why else ""


def resident_lines(state: Mapping[str, Any] | None) -> list[str]:
    """What an experiment's runs did about resident engines, a line each: switches and starts,
    the check with its numbers, the fall back and its reason; why it was not used when that
    needs saying. Empty for an experiment never asked (written before) or one with nothing to
    switch."""
    if not state or "used" not in state:
        return []
    if not state.get("used"):
        why = state.get("why_not")
        if why in QUIET or not why:
            return []
        return [f"resident engines not used: {why}; every run restarted its server"]
    lines = [switch_line(state), check_line(state.get("check")), fallback_line(state)]
    return [line for line in lines if line]


def resident_line(state: Mapping[str, Any] | None) -> str:
    """`resident_lines` in one line, for `experiment`'s closing words."""
    return "; ".join(resident_lines(state))


def resident_note(state: Mapping[str, Any] | None) -> str | None:
    """The note a verdict carries when the experiment fell back to restarts or its check differs
    (its runs are then served both ways); None otherwise."""
    if not state or not state.get("used"):
        return None
    found = state.get("check")
    check: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    switches = int(state.get("switches") or 0)
    how = "paused, then continued" if paused(state) else "slept, then woken"
    served = f"{switches} of its runs were on a switched ({how}) server"
    why = state.get("fallback")
    if why:
        return f"Note: resident engines fell back to restarts ({why}); {served}."
    if check.get("verdict") == "differs":
        return f"Note: the resident check differs ({check.get('why')}); {served}."
    return None


def resident_json(state: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What `compare --json` carries of it: used, switches, starts, the check's verdict and
    numbers, the fall back, the note and the lines; None for an experiment never asked."""
    if not state or "used" not in state:
        return None
    check = state.get("check") if isinstance(state.get("check"), Mapping) else None
    return {
        "used": bool(state.get("used")),
        "why_not": state.get("why_not"),
        "switches": int(state.get("switches") or 0),
        "starts": int(state.get("starts") or 0),
        "check": dict(check) if check else None,
        "fallback": state.get("fallback"),
        "note": resident_note(state),
        "lines": resident_lines(state),
    }
