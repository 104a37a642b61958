"""Issue 23, item 1 in the HTML report: it opens with the headline decision, right under its
title, with the sentences escaped (labels carry values from the DB)."""

from __future__ import annotations

import re
from pathlib import Path

from store import snapshot
from tuning.compare.headline import CandidateHeadline, Headline
from tuning.present.report import build_report
from tuning.present.report_verdicts import headline_section

REPO = Path(__file__).resolve().parents[3]
DECISIONS = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"


def test_the_report_opens_with_the_decision() -> None:
    page = build_report(snapshot.expanded(DECISIONS), experiment_ids=[1], kinds=())
    body = page.split("</header>", 1)[1]
    first = re.match(r'<section id="([^"]+)">', body)
    assert first and first.group(1) == "headline"
    section = body[: body.index("</section>")]
    assert (
        "kv-cache-memory-bytes 16 GiB vs 1 GiB: objective output throughput +212.6 % (better); "
        "guards p99 TTFT -93.4 % (better), p99 TPOT -21.7 % (undecided); 18 other metrics for "
        "information, not corrected"
    ) in section
    assert "Judged by repeat until decided" in section
    assert "<b>Recommendation:</b> Set kv-cache-memory-bytes = 16 GiB" in section
    assert page.index('id="headline"') < page.index('id="verdicts"') < page.index('id="table"')


def test_the_section_escapes_and_says_the_recommendation() -> None:
    side = CandidateHeadline("x = <b>", "x = 1", "x <b> vs 1", (), 0, "recommended", False, False)
    rec = "Set x = <i>2</i>: better."
    lead = Headline((side,), "Decided <by> a rule.", rec, f"Recommendation: {rec}", "value")
    html = headline_section(lead)
    assert "<b>" not in html.replace("<b>Recommendation:</b>", "")
    assert "x &lt;b&gt; vs 1: no primary metric measured" in html
    assert "Decided &lt;by&gt; a rule." in html
    assert "<b>Recommendation:</b> Set x = &lt;i&gt;2&lt;/i&gt;: better." in html
    assert headline_section(Headline((), "", None, None)) == ""
