"""A search's decision in words, one phrase per fact, for `search show`, the Searches page, New
experiment's search panel and a plan's summary: the choice line (the choice with its interval
against the closest rival, a named tie with its tie-breaker, or what keeps it undecided), each
value's SLO state with its interval, and the confirm's result within the choice line.

Everything is read from the facts of tuning.decide.search.show (the decision record and the
confirm's); nothing is judged here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.failure_kinds import failure_words
from core.units import fmt
from tuning.compare.catalog import metric_label
from tuning.compare.present import pct_number
from tuning.engine.value_text import format_value


def _v(value: Any) -> str:
    return format_value(value)


def _values(values: Sequence[Any]) -> str:
    return ", ".join(_v(v) for v in values)


def failed_words(step: Mapping[str, Any]) -> str:
    """' (out of memory)' after a failed step's status: its failure kind in words, as the pages
    say it (--json keeps the key); '' for a step that did not fail."""
    said = failure_words(step.get("failure_kind"))
    return f" ({said})" if said else ""


def pct_interval(found: Mapping[str, Any]) -> str:
    """'+4.1 % (99.5 % CI +1.0 … +7.3 %, 5 runs a side)' of a change record."""
    change = found.get("change_pct")
    text = "—" if change is None else f"{pct_number(change)} %"
    ci, conf = found.get("interval_pct"), found.get("confidence")
    runs = found.get("runs_a_side") or []
    detail = []
    if ci:
        level = "" if conf is None else f"{float(conf) * 100:.4g} % "
        detail.append(f"{level}CI {pct_number(ci[0])} … {pct_number(ci[1])} %")
    if runs:
        detail.append(f"{min(runs)} runs a side" if len(set(runs)) == 1 else f"runs {runs}")
    return text + (f" ({', '.join(detail)})" if detail else "")


def slo_checks_text(slo: Mapping[str, Any] | None) -> str:
    """'p99 TPOT 17.1 … 18.9 ms (limit 20 ms)' over the runs; 'p99 TPOT 22.1 ms (limit 20 ms)'
    for one run."""
    parts = []
    for c in (slo or {}).get("checks") or []:
        name, limit = f"p99 {str(c['name']).upper()}", f"(limit {c['limit']:g} ms)"
        if c.get("low") is not None and c.get("high") is not None:
            parts.append(f"{name} {fmt(c['low'], 'ms')} … {fmt(c['high'], 'ms')} {limit}")
        elif c.get("mean") is not None:
            parts.append(f"{name} {fmt(c['mean'], 'ms')} {limit}")
    return "; ".join(parts)


def slo_state_words(slo: Mapping[str, Any] | None) -> str:
    """'SLOs met: p99 TPOT 17.1 … 18.9 ms (limit 20 ms)', 'p99 TPOT 22.1 ms (limit 20 ms) in its
    one run', or '' without SLOs."""
    if not slo or slo.get("state") == "no SLO":
        return ""
    detail = slo_checks_text(slo)
    if slo.get("state") == "tried once":
        return f"{detail} in its one run" if detail else "SLOs tried once"
    return f"SLOs {slo.get('state')}" + (f": {detail}" if detail else "")


def _row(f: Mapping[str, Any], value: Any) -> Mapping[str, Any]:
    rows = (f.get("decision") or {}).get("values") or []
    return next((r for r in rows if r["value"] == value), {})


def measured(f: Mapping[str, Any], value: Any) -> str:
    """'output throughput 7,335 tok/s (95 % interval 7,100 … 7,560 tok/s, 5 runs)', or
    '... 7,335 tok/s in its one run'."""
    row = _row(f, value)
    unit = f["unit"]
    text = f"{metric_label(f['objective'])} {fmt(row.get('mean'), unit)}"
    ci = row.get("interval")
    if ci:
        return (
            text + f" (95 % interval {fmt(ci[0], unit)} … {fmt(ci[1], unit)}, {row['runs']} runs)"
        )
    return text + (" in its one run" if row.get("runs") == 1 else "")


def _rival_text(f: Mapping[str, Any], rival: Mapping[str, Any] | None, chosen: Any) -> str:
    if not rival:
        return "no rival was left to race (every other value gave nothing usable)"
    value = _v(rival["value"])
    if rival.get("why") == "slo":
        return f"closest rival {value} fails the SLOs ({slo_checks_text(rival.get('slo'))})"
    if rival.get("why") == "slo undecided":
        state = slo_state_words(_row(f, rival["value"]).get("slo"))
        return f"{value} is not ruled out ({_v(chosen)} vs it {pct_interval(rival)}): its {state}"
    against = rival.get("against")
    words = {"better": "better than", "worse": "worse than", "equivalent": "equivalent to"}
    verdict = words.get(str(rival.get("verdict")), "undecided against")
    who = _v(against) if against is not None else _v(chosen)
    return f"{who} {verdict} the closest rival {value} by {pct_interval(rival)}"


def decision_line(f: Mapping[str, Any]) -> str:
    """The search's own decision in words (before any confirm)."""
    d = f.get("decision") or {}
    outcome = d.get("outcome")
    if outcome == "chosen":
        chosen = d["chosen"]
        slo = slo_state_words(_row(f, chosen).get("slo"))
        text = f"chosen {_v(chosen)}: {measured(f, chosen)}"
        text += f"; {slo}" if slo else ""
        return text + f"; {_rival_text(f, d.get('rival'), chosen)}"
    if outcome == "tie":
        rival = d.get("rival") or {}
        kind = d.get("tie_kind")
        how = "equivalent within the margin" if kind == "equivalent" else "undecided"
        text = f"tie: {_values(d['tie'])} ({how}: {_v(rival.get('against'))} vs "
        text += f"{_v(rival.get('value'))} {pct_interval(rival)})"
        breaker = (d.get("tie_breaker") or {}).get("text", "")
        text += f"; the tie-breaker picks {_v(d['chosen'])}: {breaker}"
        return text + (f"; {d['next']}" if d.get("next") else "")
    if outcome == "undecided":
        leader = d.get("leader")
        text = f"undecided: {d.get('why')}"
        if leader is not None:
            slo = slo_state_words(_row(f, leader).get("slo"))
            text += f"; leader {_v(leader)}: {measured(f, leader)}" + (f", {slo}" if slo else "")
        return text + (f"; next: {d['next']}" if d.get("next") else "")
    return f"no choice: {d.get('why') or 'no value gave a usable result'}"


def confirm_words(f: Mapping[str, Any]) -> str:
    """The confirm's result as the choice line ends: how it settled the choice, or where it is."""
    c, choice = f.get("confirm"), f.get("choice") or {}
    if not c:
        return ""
    where = f"confirm experiment {c['experiment_id']}"
    pair = f"{_v(c['chosen'])} vs {_v(c['other'])}"
    if c.get("verdict") not in ("better", "worse", "equivalent", "undecided"):
        return f"{where} ({c['status']}): {pair} {c['verdict']}"
    result = f"{pair} {c['verdict']} {pct_interval(c)}"
    slo = c.get("slo") or {}
    failed = [
        c[side] for side in ("chosen", "other") if (slo.get(side) or {}).get("state") == "failed"
    ]
    if failed:
        result += f"; fails the SLOs in its runs: {_values(failed)}"
    if choice.get("source") != "confirm":
        return f"{where} ({c['status']}), against the baseline: {result}"
    if choice.get("outcome") == "chosen":
        confirmed = choice["chosen"] == c["chosen"]
        head = "confirmed" if confirmed else f"the confirm overturned {_v(c['chosen'])}"
        return f"{head}: {result} ({where})"
    if choice.get("outcome") == "tie":
        breaker = (choice.get("tie_breaker") or {}).get("text", "")
        return (
            f"after the confirm, a tie: {result} ({where}); the tie-breaker picks "
            f"{_v(choice['chosen'])}: {breaker}"
        )
    if choice.get("outcome") == "undecided":
        return f"after the confirm, still undecided: {result} ({where}); {choice.get('why')}"
    return f"after the confirm, no choice: {result} ({where}); {choice.get('why')}"


def choice_line(f: Mapping[str, Any]) -> str:
    """THE choice line: the search's decision, then the confirm's result where there is one."""
    tail = confirm_words(f)
    return decision_line(f) + (f" · {tail}" if tail else "")


def search_headline(f: Mapping[str, Any]) -> str:
    """'chosen 138', 'chosen 138 (confirmed)', 'tie 1696, 2580: 1696', 'undecided (138 leads)'."""
    choice = f.get("choice") or {}
    outcome, chosen = choice.get("outcome"), choice.get("chosen")
    confirmed = choice.get("source") == "confirm"
    if outcome == "chosen":
        return f"chosen {_v(chosen)}" + (" (confirmed)" if confirmed else "")
    if outcome == "tie":
        after = " after the confirm" if confirmed else ""
        return f"tie {_values(choice.get('tie') or [])}{after}: {_v(chosen)} by its tie-breaker"
    if outcome == "undecided":
        leader = choice.get("leader")
        return "undecided" + ("" if leader is None else f" ({_v(leader)} leads)")
    return "no choice"


def value_lines(f: Mapping[str, Any]) -> list[str]:
    """One line per value the search ran: runs, mean objective and interval, SLOs, status."""
    out = []
    for row in (f.get("decision") or {}).get("values") or []:
        head = f"  {f['param']} = {_v(row['value'])}"
        slo = slo_state_words(row.get("slo"))
        if row.get("runs") == 1 and row.get("status") == "tried once":
            facts = f"{metric_label(f['objective'])} {fmt(row.get('mean'), f['unit'])}"
            facts += f", {slo_checks_text(row.get('slo'))}" if slo else ""
            out.append(f"{head}: tried once, no interval yet: {facts}")
            continue
        text = f"{head}: {measured(f, row['value'])}" + (f"; {slo}" if slo else "")
        out.append(f"{text}; {row['status']}")
    return out


def search_choice_text(result: Mapping[str, Any]) -> str:
    """A search's choice in a few words from its stored result alone (a plan's summary and
    report): 'chosen 16 (better than 8 by +12.0 % (…))', 'tie 16, 32: 16 by its tie-breaker
    (…)', 'undecided (16 leads: …): the baseline kept', 'no choice (…): the baseline kept'."""
    d = result.get("decision") or {}
    outcome, chosen = d.get("outcome"), result.get("chosen")
    if outcome == "chosen" and chosen is not None:
        rival = d.get("rival") or {}
        if rival.get("why") == "objective":
            return (
                f"chosen {_v(chosen)} (better than {_v(rival['value'])} by {pct_interval(rival)})"
            )
        if rival.get("why") == "slo":
            return f"chosen {_v(chosen)} ({_v(rival['value'])} fails the SLOs)"
        if rival.get("why") == "slo undecided":
            return f"chosen {_v(chosen)} (meets the SLOs; {_v(rival['value'])}'s are undecided)"
        return f"chosen {_v(chosen)} (the only value that gave a usable result)"
    if outcome == "tie" and chosen is not None:
        breaker = (d.get("tie_breaker") or {}).get("text", "")
        return f"tie {_values(d.get('tie') or [])}: {_v(chosen)} by its tie-breaker ({breaker})"
    if outcome == "undecided":
        leader = d.get("leader")
        lead = "" if leader is None else f"{_v(leader)} leads: "
        return f"undecided ({lead}{d.get('why')}): the baseline kept"
    if not d and chosen is not None:  # a result from before decisions were stored
        return f"{_v(chosen)} (from single runs: no interval)"
    return f"no choice ({d.get('why') or 'no value gave a usable result'}): the baseline kept"
