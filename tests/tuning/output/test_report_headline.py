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
        "kv-cache-memory-bytes 16 GiB vs 1 GiB: output throughput +212.6 % (better), "
        "mean TTFT -95.6 % (better), mean TPOT +31.6 % (worse); 14 more decided (9 better, "
        "5 worse); 3 metrics undecided; 1 equivalent"
    ) in section
    assert "Recommendation" not in section  # no default known: the report says why further down
    assert page.index('id="headline"') < page.index('id="verdicts"') < page.index('id="table"')


def test_the_section_escapes_and_says_the_recommendation() -> None:
    side = CandidateHeadline("x = <b>", "x = 1", "x <b> vs 1", (), (), (), (), False)
    html = headline_section(Headline((side,), "Set x = <i>2</i>: better."))
    assert "<b>" not in html.replace("<b>Recommendation:</b>", "")
    assert "x &lt;b&gt; vs 1: no metric decided better or worse" in html
    assert "<b>Recommendation:</b> Set x = &lt;i&gt;2&lt;/i&gt;: better." in html
    assert headline_section(Headline((), None)) == ""
