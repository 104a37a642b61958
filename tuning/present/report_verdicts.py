"""The report's sections about the decision, as HTML: the decision at a glance (the headline, first
thing a reader sees: one sentence per candidate over the primary metrics, the rule that decided,
the recommendation, only a decided one, or what would decide it), whether the runs are
comparable, the verdicts per candidate (every primary metric with the decision's verdict, then the
other metrics for information, not corrected), the recommendation and the side-by-side table.
Every text escaped (labels carry values from the DB); tuning.present.report puts them in the
document with the runs, charts and definitions."""

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
    Cell,
    change_text,
    ci_text,
    comparability_text,
    drift_text,
    failed_text,
    noise_text,
    not_applied_text,
    reused_text,
    slo_text,
    suspect_text,
    table_columns,
    table_rows,
    verdict_rule,
)

# Set apart from the sections below it: the first thing a reader of the report sees.
HEADLINE_STYLE = (
    "#headline{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:0 1rem}"
    "#headline h2{border:0;margin-top:.6rem}#headline li{margin:.3rem 0}"
)


def headline_section(lead: Headline) -> str:
    """`<section id="headline">`: the sentences (escaped: labels carry values from the DB), the
    rule, the recommendation or what would decide it; nothing when there is nothing to say."""
    if not lead.lines:
        return ""
    items = "".join(
        f'<li class="headline-candidate">{html.escape(text)}</li>' for text in lead.sentences
    )
    rule = f'<p class="headline-rule muted">{html.escape(lead.rule)}</p>' if lead.candidates else ""
    rule += "".join(f'<p class="headline-note warn">{html.escape(n)}</p>' for n in lead.notes)
    closing = lead.closing or ""
    head, _, rest = closing.partition(": ")
    css = "headline-recommendation" if lead.kind == "value" else "headline-next"
    end = f'<p class="{css}"><b>{html.escape(head)}:</b> {html.escape(rest)}</p>' if rest else ""
    return (
        '<section id="headline"><h2>Decision</h2>'
        f"{f'<ul>{items}</ul>' if items else ''}{rule}{end}</section>"
    )


def escaped(value: Any) -> str:
    """Escaped text for HTML (None -> an em dash)."""
    if value is None or value == "":
        return "—"
    return html.escape(str(value), quote=True)


def checks_section(comparison: Comparison) -> str:
    imported = any(s.imported for s in comparison.sides)  # what a file lacks is unchecked
    css = "warn" if comparison.excluded or imported else "ok"
    summary = comparability_text(comparison, lambda s: f"<b>{escaped(s)}</b>")
    parts = [f'<section id="comparability"><h2>Comparability</h2><p class="{css}">{summary}</p>']
    if comparison.excluded:
        rows = "".join(
            f"<tr><td>{c.run_id}</td><td>{c.baseline_id}</td><td>{escaped(c.reason)}</td></tr>"
            for c in comparison.excluded
        )
        parts.append(
            f'<table id="not-comparable"><tr><th>run</th><th>baseline run</th>'
            f"<th>why not comparable</th></tr>{rows}</table>"
        )
    notes = [
        (not_applied_text(comparison), ' class="warn"'),
        (reused_text(comparison), ""),
        (failed_text(comparison), ""),
        (suspect_text(comparison), ' class="warn"'),
        (noise_text(comparison), ' class="muted"'),
        (slo_text(comparison.slo_ms), ""),
    ]
    parts += [f"<p{attr}>{escaped(text)}</p>" for text, attr in notes if text]
    parts.append("</section>")
    return "".join(parts)


def _verdict_item(comparison: Comparison, side: Any, metric: Any, role: str) -> str:
    c = comparison.changes[(side.label, metric.key)]
    ci = ci_text(c, comparison.confidence, metric.unit)
    css = c.verdict if c.verdict in CLEAR else "muted"
    interval = f" ({escaped(ci)})" if ci else ""
    return (
        f'<li class="{css}" data-role="{escaped(role)}">{escaped(role)}: '
        f"{VERDICT_LABEL[c.verdict]}: "
        f"{escaped(metric.label)} {escaped(change_text(c, metric.unit))}{interval}</li>"
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
        parts.append(f"<h3>{escaped(side.label)} vs {escaped(comparison.baseline.label)}</h3>")
        if side.not_applied or comparison.baseline.not_applied:
            parts.append("<p>No verdict: not applied by the engine.</p>")
        parts.append(f'<ul class="primary">{"".join(primary)}</ul>' if primary else "")
        if info:
            parts.append(
                f'<p class="muted">Other metrics, {INFORMATION} (a plain 95 % each):</p>'
                f'<ul class="information">{"".join(info)}</ul>'
            )
    if drift := drift_text(comparison):
        parts.append(f'<p class="muted" id="baseline-drift">{escaped(drift)}</p>')
    rule = verdict_rule(lambda s: f"<i>{s}</i>", comparison.confidence, comparison.margin)
    parts.append(f'<p class="muted">{escaped(lead.rule)} {rule}</p></section>')
    return "".join(parts)


def prefer_section(preference: Preference, command: str | None = None) -> str:
    """The recommendation (only a decided one), keep vLLM's default, or why there is none and
    the command that would decide it."""
    css = {"value": "better", "default": "ok", "keep": "ok", "none": "muted"}[preference.kind]
    run = f"<p>To decide it: <code>{escaped(command)}</code></p>" if command else ""
    return (
        f'<section id="recommendation"><h2>Recommendation</h2>'
        f'<p class="{css}">{escaped(preference.text)}</p>{run}</section>'
    )


def _td(cell: Cell) -> str:
    css = " ".join(x for x in ("num" if cell.numeric else "", cell.tone) if x)
    attrs = (f' class="{css}"' if css else "") + (
        f' title="{escaped(cell.title)}"' if cell.title else ""
    )
    return f"<td{attrs}>{escaped(cell.text) if cell.text else ''}</td>"


def table_section(comparison: Comparison) -> str:
    head = "".join(f"<th>{escaped(c)}</th>" for c in table_columns(comparison))
    body = "".join("<tr>" + "".join(map(_td, row)) + "</tr>" for row in table_rows(comparison))
    return (
        '<section id="table"><h2>Side by side</h2><p class="muted">Values are the mean over '
        "each side's runs; Δ is the candidate's change of the mean vs the baseline (green / "
        "red only when the verdict is better / worse; undecided, equivalent and not applied are "
        "grey).</p>"
        f'<table id="metrics"><tr>{head}</tr>{body}</table></section>'
    )
