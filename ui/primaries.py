"""New experiment's "What decides" fold: the experiment's objective and guards
(tuning.compare.primaries), which alone decide it; every other metric is shown for information.
Returns the Primaries the form declares (stored on the experiment once planned)."""

from __future__ import annotations

import streamlit as st

from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.primaries import DEFAULT_GUARDS, DEFAULT_OBJECTIVE, Primaries, primary_choices


def _label(key: str) -> str:
    metric = METRIC_BY_KEY[key]
    return f"{metric.label} ({metric.unit}, {metric.direction_text})"


def render_primaries() -> Primaries:
    """The objective (one metric) and the guards (any others), defaults: output throughput,
    guarded by p99 TTFT and p99 TPOT."""
    choices = primary_choices()
    with st.expander("What decides: objective and guards", expanded=False):
        objective = st.selectbox(
            "Objective: the metric to improve",
            choices,
            index=choices.index(DEFAULT_OBJECTIVE),
            format_func=_label,
            key="new_objective",
        )
        others = [k for k in choices if k != objective]
        guards = st.multiselect(
            "Guards: metrics that must not get worse",
            others,
            default=[g for g in DEFAULT_GUARDS if g in others],
            format_func=_label,
            key="new_guards",
        )
        st.caption(
            "Only these decide, with the family-wise false-alarm rate held across them (Holm); "
            "a value is recommended only when the objective is decided better and no guard "
            "worse. Every other metric is shown for information, not corrected."
        )
    return Primaries(objective, tuple(guards))
