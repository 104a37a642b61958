"""The Compare page's verdicts under the headline (ui.decision): for each candidate one line per
primary metric (its objective, then its guards) with the baseline's and the candidate's mean, the
change and the decision's verdict with what stands behind it; every other metric folded into one
line, "for information, not corrected". The words come from tuning.compare.present (the CLI and
the report say the same); lines wrap, so a verdict is never cut the way a table cell is.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from tuning.compare.catalog import Metric
from tuning.compare.chunks import chunk_note, is_per_chunk
from tuning.compare.comparison import Comparison, Side
from tuning.compare.prefer import Preference
from tuning.compare.present import (
    INFORMATION,
    TONE_MARK,
    change_text,
    drift_text,
    fmt,
    tone,
    verdict_text,
)
from ui.common import md_escape


def summary_line(comparison: Comparison, side: Side, metric: Metric) -> str:
    """'**output throughput**: 182 → 170 tok/s (-6.5 %) · :red[**▼ worse** (95 % CI …)]'."""
    change = comparison.changes.get((side.label, metric.key))
    base = fmt(comparison.baseline.stats(metric.key)["mean"], metric.unit)
    cand = fmt(side.stats(metric.key)["mean"], metric.unit)
    values = md_escape(f"{base} → {cand}")
    chunks = chunk_note(comparison, side) if is_per_chunk(metric) else None
    aside = f" · :orange[{md_escape(chunks)}]" if chunks else ""  # ITL is per chunk
    if change is None:
        return f"**{md_escape(metric.label)}**: {values}{aside}"
    verdict = md_escape(verdict_text(change, comparison.confidence, metric.unit))
    shade = tone(metric, change)
    if shade in ("better", "worse"):
        verdict = f"**{verdict}**"
    if TONE_MARK[shade]:  # undecided and equivalent read grey, never green or red
        verdict = f":{TONE_MARK[shade]}[{verdict}]"
    return (
        f"**{md_escape(metric.label)}**: {values} "
        f"({md_escape(change_text(change, metric.unit))}) · {verdict}{aside}"
    )


def _fold(
    comparison: Comparison, side: Side, metrics: Sequence[Metric], what: str, key: str
) -> None:
    """Metrics of one verdict folded into one line: the count and their names; open for the
    whole verdict lines."""
    if not metrics:
        return
    names = ", ".join(m.label for m in metrics)
    with st.expander(md_escape(f"{len(metrics)} {what}: {names}"), expanded=False, key=key):
        st.markdown("\n".join(f"- {summary_line(comparison, side, m)}" for m in metrics))


def _candidate_block(comparison: Comparison, side: Side, i: int) -> None:
    base = comparison.baseline
    st.markdown(
        f"**{md_escape(side.label)}** ({len(side.measured_ids)} of "
        f"{len(side.run_ids)} runs measured) vs baseline "
        f"**{md_escape(base.label)}** ({len(base.measured_ids)} of "
        f"{len(base.run_ids)})"
    )
    primary = [m for m in comparison.metrics if m.key in comparison.roles]
    if primary:
        st.markdown(
            "\n".join(
                f"- *{comparison.roles[m.key]}* {summary_line(comparison, side, m)}"
                for m in primary
            )
        )
    others = [m for m in comparison.metrics if m.key not in comparison.roles]
    _fold(comparison, side, others, f"other metrics, {INFORMATION}", f"cmp_info_{i}")


def render_summary(comparison: Comparison) -> None:
    """One bordered block per candidate: who is compared, then the decision's verdict per
    primary metric and the other metrics folded."""
    if not comparison.candidates:
        return
    with st.container(key="cmp_summary"):
        st.markdown("#### Verdict per metric")
        for i, side in enumerate(comparison.candidates):
            with st.container(border=True, key=f"cmp_summary_{i}"):
                _candidate_block(comparison, side, i)
        if drift := drift_text(comparison):  # the machine's drift, beside the verdicts
            st.caption(md_escape(drift))


def render_preference(preference: Preference) -> None:
    """The recommendation under the verdicts: keep vLLM's default when no value beats it beyond
    the margin (fewer flags), set the value that does, or why the lab cannot prefer the default."""
    with st.container(key="cmp_preference"):
        text = md_escape(preference.text)
        if preference.kind == "value":
            st.success(f"**Recommendation:** {text}")
        elif preference.kind in ("default", "keep"):
            st.info(f"**Decision:** {text}")
        else:
            st.caption(f"**Recommendation:** {text}")
