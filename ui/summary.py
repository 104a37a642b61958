"""The Compare page's summary, first on the page: for each candidate, one line per metric with the
baseline's and the candidate's mean, the change and the verdict with what stands behind it. The
words come from tuning.compare.present (the CLI and the report say the same); lines wrap, so a
verdict is never cut the way a table cell is.
"""

from __future__ import annotations

import streamlit as st

from tuning.compare.catalog import Metric
from tuning.compare.comparison import Comparison, Side
from tuning.compare.prefer import Preference
from tuning.compare.present import TONE_MARK, drift_text, fmt, pct_text, tone, verdict_text
from ui.common import md_escape


def summary_line(comparison: Comparison, side: Side, metric: Metric) -> str:
    """'**output throughput**: 182 → 170 tok/s (-6.5 %) · :red[**▼ worse** (95 % CI …)]'."""
    change = comparison.changes.get((side.label, metric.key))
    base = fmt(comparison.baseline.stats(metric.key)["mean"], metric.unit)
    cand = fmt(side.stats(metric.key)["mean"], metric.unit)
    values = md_escape(f"{base} → {cand}")
    if change is None:
        return f"**{md_escape(metric.label)}**: {values}"
    verdict = md_escape(verdict_text(change, comparison.confidence))
    shade = tone(metric, change)
    if shade in ("better", "worse"):
        verdict = f"**{verdict}**"
    if TONE_MARK[shade]:  # undecided and equivalent read grey, never green or red
        verdict = f":{TONE_MARK[shade]}[{verdict}]"
    return (
        f"**{md_escape(metric.label)}**: {values} "
        f"({md_escape(pct_text(change.rel_change))}) · {verdict}"
    )


def render_summary(comparison: Comparison) -> None:
    """One bordered block per candidate: who is compared, then the verdict per metric."""
    if not comparison.candidates:
        return
    base = comparison.baseline
    with st.container(key="cmp_summary"):
        st.markdown("#### Verdict per metric")
        for i, side in enumerate(comparison.candidates):
            with st.container(border=True, key=f"cmp_summary_{i}"):
                st.markdown(
                    f"**{md_escape(side.label)}** ({len(side.measured_ids)} of "
                    f"{len(side.run_ids)} runs measured) vs baseline "
                    f"**{md_escape(base.label)}** ({len(base.measured_ids)} of "
                    f"{len(base.run_ids)})"
                )
                st.markdown(
                    "\n".join(
                        f"- {summary_line(comparison, side, metric)}"
                        for metric in comparison.metrics
                    )
                )
        if drift := drift_text(comparison):  # the machine's drift, beside the verdicts
            st.caption(md_escape(drift))


def render_preference(preference: Preference) -> None:
    """The recommendation under the verdicts: keep vLLM's default when no value beats it beyond
    the margin (fewer flags), set the value that does, or why the lab cannot prefer the default."""
    with st.container(key="cmp_preference"):
        text = md_escape(preference.text)
        if preference.kind == "value":
            st.success(f"**Recommendation:** {text}")
        elif preference.kind == "default":
            st.info(f"**Recommendation:** {text}")
        else:
            st.caption(f"**Recommendation:** {text}")
