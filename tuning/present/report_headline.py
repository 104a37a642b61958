"""The HTML report's opening section: the decision at a glance (tuning.compare.headline), one
sentence per candidate over the primary metrics, the rule that decided, and the recommendation
(only a decided one) or what would decide it, before the comparability notes and the tables."""

from __future__ import annotations

import html

from tuning.compare.headline import Headline

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
    closing = lead.closing or ""
    head, _, rest = closing.partition(": ")
    css = "headline-recommendation" if lead.kind == "value" else "headline-next"
    end = f'<p class="{css}"><b>{html.escape(head)}:</b> {html.escape(rest)}</p>' if rest else ""
    return (
        '<section id="headline"><h2>Decision</h2>'
        f"{f'<ul>{items}</ul>' if items else ''}{rule}{end}</section>"
    )
