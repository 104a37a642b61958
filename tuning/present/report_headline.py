"""The HTML report's opening section: the decision at a glance (tuning.compare.headline), one
sentence per candidate and the recommendation, before the comparability notes and the tables."""

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
