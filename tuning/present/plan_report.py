"""A tuning plan's recommendation as one offline HTML page (tuning.present.report's page: the CSP
that fetches nothing, every string escaped and secret-scrubbed): the `vllm serve` command, the gain
over the starting configuration with its interval and verdict, each search's decision log, and the
run and experiment ids behind every number (open them in the lab's Runs and Compare pages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.redact import env_secrets, scrub_text
from tuning.compare.catalog import metric_label
from tuning.compare.present import fmt, pct_number
from tuning.decide.search.plan_show import verdict_of
from tuning.decide.search.words import search_choice_text
from tuning.engine.params import format_value
from tuning.present.report import html_page, write_page
from tuning.present.report_verdicts import escaped as _e


def _ids(ids: Sequence[Any]) -> str:
    return ", ".join(str(int(i)) for i in ids) or "—"


def _config_table(start: Mapping[str, Any], final: Mapping[str, Any]) -> str:
    rows = []
    for key in sorted(set(start) | set(final)):
        a, b = start.get(key), final.get(key)
        css = ' class="changed"' if a != b else ""
        rows.append(
            f"<tr{css}><td><code>{_e(key)}</code></td>"
            f"<td>{_e('unset' if a is None else format_value(a))}</td>"
            f"<td>{_e('unset' if b is None else format_value(b))}</td></tr>"
        )
    return (
        '<table id="plan-config"><tr><th>parameter</th><th>start</th><th>recommended</th></tr>'
        + "".join(rows)
        + "</table>"
    )


def _gain_table(gains: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for g in gains:
        ci = (
            f"{pct_number(g['ci_low_pct'])} … {pct_number(g['ci_high_pct'])} %"
            if g["ci_low_pct"] is not None and g["ci_high_pct"] is not None
            else "—"
        )
        pct = "—" if g["change_pct"] is None else f"{pct_number(g['change_pct'])} %"
        tone = g["verdict"] if g["verdict"] in ("better", "worse") else "muted"
        rows.append(
            f"<tr><td>{_e(g['label'])}</td><td class=num>{_e(fmt(g['start_mean'], g['unit']))}</td>"
            f"<td class=num>{_e(fmt(g['recommended_mean'], g['unit']))}</td>"
            f"<td class=num>{_e(pct)}</td><td class=num>{_e(ci)}</td>"
            f'<td class="{tone}">{_e(g["verdict_text"] or g["verdict"])}</td></tr>'
        )
    return (
        '<table id="plan-gain"><tr><th>metric</th><th>start</th><th>recommended</th>'
        "<th>change</th><th>95 % CI</th><th>verdict</th></tr>" + "".join(rows) + "</table>"
    )


def _search_section(s: Mapping[str, Any]) -> str:
    metric = s["objective"]
    rows = "".join(
        f"<tr><td>{e['step']}</td><td>{_e(format_value(e['value']))}</td><td>{e['run_id']}</td>"
        f"<td>{_e(e['status'])}</td><td class=num>{_e(fmt(e.get(metric)))}</td>"
        f"<td>{_e(e['why'])}</td></tr>"
        for e in s["log"]
    )
    chosen = search_choice_text(s)  # a decided choice, a named tie, or undecided (issue 37)
    base = ", ".join(f"{k}={format_value(v)}" for k, v in sorted(s["baseline"].items()))
    return (
        f"<h3>{_e(s['param'])} over {s['range'][0]:g}:{s['range'][1]:g}: {_e(chosen)}</h3>"
        f'<p class="muted">Baseline: {_e(base)} · experiments {_ids(s["experiment_ids"])} · '
        f"{_e(s['stopped'])}</p><table><tr><th>step</th><th>value</th><th>run</th>"
        f"<th>status</th><th>{_e(metric)}</th><th>why this value</th></tr>{rows}</table>"
    )


def plan_page(result: Mapping[str, Any]) -> str:
    """The whole page for one plan result (`tuning.decide.search.plan.run_plan`)."""
    secrets = env_secrets()
    heading = f"Tuning plan {result['plan_key']}: {', '.join(result['params'])}"
    ev = result["evidence"]
    recommended, why_not = verdict_of(result)  # a command only for a decided recommendation
    command = result["serve_command"] if recommended else None
    now = datetime.now(UTC).isoformat(timespec="seconds")
    confirm = [*ev["confirm_runs"]["start"], *ev["confirm_runs"]["final"]]
    body = "".join(
        [
            f'<header><h1>{_e(heading)}</h1><p class="meta">vLLM Tuning Lab plan report · '
            f"generated {_e(now)} · objective {_e(metric_label(result['objective']))} · "
            "self-contained, opens offline</p></header>",
            '<section id="recommendation"><h2>Recommendation</h2>',
            f"<pre>{_e(scrub_text(command, secrets))}</pre>"
            if command
            else f'<p class="muted">Not recommended: {_e(why_not)}</p>',
            _config_table(result["start"], result["recommended"]),
            "</section>",
            '<section id="gain"><h2>Gain over the starting configuration</h2>',
            _gain_table(result["gains"]),
            f'<p class="muted">Start runs {_ids(ev["confirm_runs"]["start"])} vs recommended '
            f"runs {_ids(ev['confirm_runs']['final'])}, counterbalanced (experiments "
            f"{_ids(ev['confirm_experiments'])}); runs are the unit, the interval is the "
            "compare package's (the wider of the bootstrap and Welch's t).</p></section>",
            '<section id="searches"><h2>Searches, in order</h2>',
            *(_search_section(s) for s in result["searches"]),
            "</section>",
            '<section id="evidence"><h2>Evidence</h2><p>Open these in the lab (Runs, Compare: '
            "`tuning-lab compare RUN_ID ...`):</p><ul>",
            *(f"<li>search {_e(p)}: runs {_ids(ids)}</li>" for p, ids in ev["search_runs"].items()),
            f"<li>confirm: runs {_ids(confirm)}</li></ul></section>",
        ]
    )
    return html_page(heading, body)


def write_plan_report(result: Mapping[str, Any], out_path: str | Path) -> Path:
    return write_page(plan_page(result), out_path)
