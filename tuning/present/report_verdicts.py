"""The HTML report's decision sections: per candidate every primary metric with the decision's
verdict (then the other metrics decided at a plain 95 %, for information, not corrected), and the
recommendation (only a decided one) or what would decide it. Every string from the DB escaped."""

from __future__ import annotations

import html
from typing import Any

from tuning.compare.comparison import Comparison
from tuning.compare.headline import Headline
from tuning.compare.prefer import Preference
from tuning.compare.present import (
    CLEAR,
    INFORMATION,
    VERDICT_LABEL,
    change_text,
    ci_text,
    drift_text,
    verdict_rule,
)


def esc(value: Any) -> str:
    """Escaped text for HTML (None -> an em dash); the report's one escape."""
    if value is None or value == "":
        return "—"
    return html.escape(str(value), quote=True)


def _verdict_item(comparison: Comparison, side: Any, metric: Any, role: str) -> str:
    c = comparison.changes[(side.label, metric.key)]
    ci = ci_text(c, comparison.confidence, metric.unit)
    css = c.verdict if c.verdict in CLEAR else "muted"
    interval = f" ({esc(ci)})" if ci else ""
    return (
        f'<li class="{css}" data-role="{esc(role)}">{esc(role)}: {VERDICT_LABEL[c.verdict]}: '
        f"{esc(metric.label)} {esc(change_text(c, metric.unit))}{interval}</li>"
    )


def verdicts_section(comparison: Comparison, lead: Headline) -> str:
    """Per candidate: every primary metric with the decision's verdict, then the other metrics
    decided better or worse at a plain 95 %, for information, not corrected."""
    parts = ['<section id="verdicts"><h2>Verdicts</h2>']
    if not comparison.candidates:
        parts.append("<p>No candidate side: only one configuration among these runs.</p>")
    for side in comparison.candidates:
        primary = [
            _verdict_item(comparison, side, m, comparison.roles[m.key])
            for m in comparison.metrics
            if m.key in comparison.roles and (side.label, m.key) in comparison.changes
        ]
        info = [
            _verdict_item(comparison, side, m, "for information")
            for m in comparison.metrics
            if m.key not in comparison.roles
            and (c := comparison.changes.get((side.label, m.key))) is not None
            and c.verdict in CLEAR
        ]
        parts.append(f"<h3>{esc(side.label)} vs {esc(comparison.baseline.label)}</h3>")
        if side.not_applied or comparison.baseline.not_applied:
            parts.append("<p>No verdict: not applied by the engine.</p>")
        parts.append(f'<ul class="primary">{"".join(primary)}</ul>' if primary else "")
        if info:
            parts.append(
                f'<p class="muted">Other metrics, {INFORMATION} (a plain 95 % each):</p>'
                f'<ul class="information">{"".join(info)}</ul>'
            )
    if drift := drift_text(comparison):
        parts.append(f'<p class="muted" id="baseline-drift">{esc(drift)}</p>')
    rule = verdict_rule(lambda s: f"<i>{s}</i>", comparison.confidence, comparison.margin)
    parts.append(f'<p class="muted">{esc(lead.rule)} {rule}</p></section>')
    return "".join(parts)


def prefer_section(preference: Preference, command: str | None = None) -> str:
    """The recommendation (only a decided one), keep vLLM's default, or why there is none and
    the command that would decide it."""
    css = {"value": "better", "default": "ok", "keep": "ok", "none": "muted"}[preference.kind]
    run = f"<p>To decide it: <code>{esc(command)}</code></p>" if command else ""
    return (
        f'<section id="recommendation"><h2>Recommendation</h2>'
        f'<p class="{css}">{esc(preference.text)}</p>{run}</section>'
    )
