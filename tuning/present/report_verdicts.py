"""The report's sections about the decision, as HTML: the decision at a glance (the headline, first
thing a reader sees), whether the runs are comparable, the verdicts per candidate, the
recommendation and the side-by-side table. Every text escaped (labels carry values from the DB);
tuning.present.report puts them in the document with the runs, charts and definitions."""

from __future__ import annotations

import html
from typing import Any

from tuning.compare.comparison import Comparison
from tuning.compare.headline import Headline
from tuning.compare.prefer import Preference
from tuning.compare.present import (
    CLEAR,
    VERDICT_LABEL,
    Cell,
    ci_text,
    comparability_text,
    drift_text,
    failed_text,
    noise_text,
    not_applied_text,
    pct_text,
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
    recommendation; nothing when there is no candidate and no recommendation."""
    if not lead.lines:
        return ""
    items = "".join(
        f'<li class="headline-candidate">{html.escape(text)}</li>' for text in lead.sentences
    )
    rec = (
        f'<p class="headline-recommendation"><b>Recommendation:</b> '
        f"{html.escape(lead.recommendation)}</p>"
        if lead.recommendation
        else ""
    )
    return (
        '<section id="headline"><h2>Decision</h2>'
        f"{f'<ul>{items}</ul>' if items else ''}{rec}</section>"
    )


def escaped(value: Any) -> str:
    """Escaped text for HTML (None -> an em dash)."""
    if value is None or value == "":
        return "—"
    return html.escape(str(value), quote=True)


def checks_section(comparison: Comparison) -> str:
    css = "warn" if comparison.excluded else "ok"
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


def verdicts_section(comparison: Comparison) -> str:
    parts = ['<section id="verdicts"><h2>Verdicts</h2>']
    if not comparison.candidates:
        parts.append("<p>No candidate side: only one configuration among these runs.</p>")
    for side in comparison.candidates:
        items = []
        counts: dict[str, int] = {}
        for metric in comparison.metrics:
            c = comparison.changes.get((side.label, metric.key))
            if c is None:
                continue
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
            if c.verdict in CLEAR:
                ci = ci_text(c, comparison.confidence)
                shown = f"{escaped(metric.label)} {pct_text(c.rel_change)}"
                items.append(
                    f'<li class="{c.verdict}">{VERDICT_LABEL[c.verdict]}: '
                    f"{shown}{f' ({ci})' if ci else ''}</li>"
                )
        rest = ", ".join(f"{n} {escaped(v)}" for v, n in sorted(counts.items()) if v not in CLEAR)
        parts.append(f"<h3>{escaped(side.label)} vs {escaped(comparison.baseline.label)}</h3>")
        none = "No verdict: not applied by the engine." if counts.get("not applied") else ""
        parts.append(
            f"<ul>{''.join(items)}</ul>"
            if items
            else f"<p>{none or 'No metric is clearly better or worse.'}</p>"
        )
        if rest:
            parts.append(f'<p class="muted">Other metrics: {rest}.</p>')
    if drift := drift_text(comparison):
        parts.append(f'<p class="muted" id="baseline-drift">{escaped(drift)}</p>')
    rule = verdict_rule(lambda s: f"<i>{s}</i>", comparison.confidence, comparison.margin)
    parts.append(f'<p class="muted">{rule}</p></section>')
    return "".join(parts)


def prefer_section(preference: Preference) -> str:
    """The recommendation: keep vLLM's default, set a value, or why the lab cannot prefer one."""
    css = {"value": "better", "default": "ok", "none": "muted"}[preference.kind]
    return (
        f'<section id="recommendation"><h2>Recommendation</h2>'
        f'<p class="{css}">{escaped(preference.text)}</p></section>'
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
