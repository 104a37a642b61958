"""The report's opening cards, as GuideLLM's report opens: model, hardware, engine and vLLM version,
workload, and the runs and experiments it covers, so whoever gets the file knows what the numbers
are of before reading one (tuning.compare.context says it in words)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from core.redact import scrub_text
from tuning.compare.comparison import Comparison
from tuning.compare.context import RunContext, comparison_context, run_context

CARDS_STYLE = """
.cards{display:flex;flex-wrap:wrap;gap:.6rem;margin:1rem 0}
.card{border:1px solid #d0d7de;border-radius:8px;padding:.5rem .8rem;min-width:10rem;
flex:1 1 12rem;background:#f6f8fa}.card .k{color:#6e7781;font-size:.8rem;text-transform:uppercase;
letter-spacing:.03em}.card .v{font-weight:600;overflow-wrap:anywhere}
"""


def covered_text(context: RunContext, experiments: Sequence[Mapping[str, Any]] = ()) -> str:
    """'6 runs · experiment 1' / '12 runs · experiments 1, 2' / '3 runs · no experiment'."""
    ids = sorted({*context.experiments, *(int(e["id"]) for e in experiments)})
    runs = f"{context.runs:,} run{'s' if context.runs != 1 else ''}"
    if not ids:
        return f"{runs} · no experiment"
    return f"{runs} · experiment{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"


def card_items(
    runs: Sequence[Mapping[str, Any]], experiments: Sequence[Mapping[str, Any]] = ()
) -> list[tuple[str, str]]:
    """(label, text) per card, in the order the report shows them."""
    ctx = run_context(runs)
    return [
        ("model", ctx.model),
        ("hardware", ctx.hardware),
        ("engine", ctx.engine),
        ("workload", ctx.workload),
        ("covers", covered_text(ctx, experiments)),
    ]


def cards_section(
    runs: Sequence[Mapping[str, Any]],
    experiments: Sequence[Mapping[str, Any]],
    secrets: Sequence[str] = (),
) -> str:
    """The cards as HTML, for the report's header (the decision stays its first section): every
    text escaped and secret-scrubbed (rows may be a teammate's)."""
    cards = "".join(
        f'<div class="card" data-card="{key}"><div class="k">{key}</div>'
        f'<div class="v">{html.escape(scrub_text(text, secrets), quote=True)}</div></div>'
        for key, text in card_items(runs, experiments)
    )
    return f'<div id="cards" class="cards">{cards}</div>'


def chart_lines(runs: Sequence[Mapping[str, Any]], comparison: Comparison) -> list[str]:
    """What each chart of the report carries under its title, as an exported chart does."""
    return comparison_context(runs, comparison).lines()
