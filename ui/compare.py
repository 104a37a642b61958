"""Render helpers for the Compare page: each takes domain objects (runs, a Comparison) and draws.

No module-level state; widget keys are stable (`cmp_*`, `dl_*`) so browser tests can find them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from tuning.charts import build as ch
from tuning.compare.comparison import (
    METRICS,
    VERDICT_LABEL,
    Comparison,
    Metric,
    available_series,
    default_baseline,
    fmt_value,
    noise_floor,
)
from tuning.output import export

GOOD = "color: #1a7f37; font-weight: 600"
BAD = "color: #cf222e; font-weight: 600"
FAINT_GOOD = "color: #1a7f37"
FAINT_BAD = "color: #cf222e"
MUTED = "color: #6e7781"


def parse_id_list(raw: Any) -> list[int]:
    """'1,2, 3' or ['1', '2'] -> [1, 2, 3]; anything not an integer is dropped."""
    items: list[str] = []
    if isinstance(raw, (list, tuple)):
        for x in raw:
            items += str(x).split(",")
    elif raw is not None:
        items = str(raw).split(",")
    out = []
    for item in items:
        item = item.strip()
        if item.isdigit():
            out.append(int(item))
    return list(dict.fromkeys(out))


def run_label(run: Mapping[str, Any]) -> str:
    rep = run.get("repeat_index")
    rep_s = f" · repeat {int(rep) + 1}" if rep is not None else ""
    return f"run {run['id']} · {run.get('param')} = {run.get('value')}{rep_s} · {run.get('status')}"


def pick_sides(
    runs: Sequence[Mapping[str, Any]], scope: str, preset_baseline: Sequence[int] | None = None
) -> tuple[list[int], list[int]]:
    """Baseline and candidate multiselects; defaults: the first value's runs, and the rest."""
    ids = [int(r["id"]) for r in runs]
    labels = {int(r["id"]): run_label(r) for r in runs}
    default_base = [i for i in (preset_baseline or []) if i in ids] or default_baseline(runs)
    with st.container(key="cmp_sides"):
        left, right = st.columns(2)
        base = left.multiselect(
            "Baseline runs (one configuration; its repeats)",
            ids,
            default=default_base,
            format_func=lambda i: labels[i],
            key=f"cmp_baseline_{scope}",
        )
        rest = [i for i in ids if i not in base]
        cand = right.multiselect(
            "Candidate runs (grouped by value)",
            rest,
            default=rest,
            format_func=lambda i: labels[i],
            key=f"cmp_candidates_{scope}",
        )
    return list(base), [i for i in cand if i not in base]


def slo_inputs() -> dict[str, float]:
    """Goodput SLOs in ms; 0 = not set. Goodput is recomputed from the stored request rows."""
    st.markdown(
        "**Goodput SLOs** (0 = off): a request is *good* when it succeeded and every set "
        "limit holds; goodput = good requests / duration (vLLM's definition, TPOT 0 for "
        "1-token outputs)."
    )
    cols = st.columns(3)
    out: dict[str, float] = {}
    for col, name in zip(cols, ("ttft", "tpot", "e2el")):
        value = col.number_input(
            f"{name.upper()} ≤ ms", min_value=0.0, value=0.0, step=10.0, key=f"cmp_slo_{name}"
        )
        if value and value > 0:
            out[name] = float(value)
    return out


def render_checks(comparison: Comparison) -> None:
    """Comparability first: a comparison of runs that differ in two ways says nothing."""
    with st.container(key="cmp_checks", border=True):
        st.markdown("#### Comparability")
        n = sum(len(s.run_ids) for s in comparison.sides)
        excluded = comparison.excluded
        if not excluded:
            what = f" — parameter **{comparison.param}**" if comparison.param else ""
            st.success(
                f"All {n} runs are comparable: same workload fingerprint, model, engine and "
                f"vLLM version, hardware; exactly one parameter differs{what}."
            )
        else:
            st.warning(
                f"{len(excluded)} run(s) left out: not comparable with baseline run "
                f"{excluded[0].baseline_id}. {n} run(s) compared."
            )
            st.dataframe(
                pd.DataFrame(
                    [
                        {
                            "run": c.run_id,
                            "baseline run": c.baseline_id,
                            "why not comparable": c.reason,
                        }
                        for c in excluded
                    ]
                ),
                hide_index=True,
                key="cmp_not_comparable",
            )
        failed = [(s.label, f) for s in comparison.sides for f in s.failed]
        if failed:
            st.info(
                "Runs without a measurement (kept as results): "
                + "; ".join(
                    f"run {f['run_id']} ({label}): {f['status']}"
                    + (f" [{f['kind']}]" if f.get("kind") else "")
                    for label, f in failed
                )
            )
        nf = [
            (key, noise_floor(comparison.baseline.values.get(key) or []))
            for key in ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
        ]
        nf = [(k, x) for k, x in nf if x.min_detectable is not None]
        if nf:
            st.caption(
                f"Noise floor from the baseline's {nf[0][1].n} repeats (A/A): "
                + ", ".join(
                    f"{k}: run-to-run CV {x.cv * 100:.1f} %, smallest resolvable "
                    f"change ≈ {x.min_detectable * 100:.1f} %"
                    for k, x in nf
                )
            )


def _cell_style(metric: Metric, change: Any) -> str:
    if change is None or change.rel_change is None:
        return MUTED
    good = (change.rel_change > 0) == (metric.better == "higher")
    if change.rel_change == 0:
        return MUTED
    if change.verdict in ("better", "worse"):
        return GOOD if good else BAD
    return FAINT_GOOD if good else FAINT_BAD


def table_frames(comparison: Comparison) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(text table, css table) of the same shape: rows = metrics, columns per side."""
    pct = f"{comparison.confidence * 100:.0f} %"
    text: dict[str, list[str]] = {"metric": [], "better": []}
    css: dict[str, list[str]] = {"metric": [], "better": []}
    base = comparison.baseline
    base_col = f"baseline: {base.label}"
    text[base_col], css[base_col] = [], []
    for side in comparison.candidates:
        for col in (side.label, f"Δ {side.label}", f"verdict {side.label}"):
            text[col], css[col] = [], []
    text["metric"].append("runs (measured / total)")
    text["better"].append("")
    text[base_col].append(f"{len(base.measured_ids)} / {len(base.run_ids)}")
    for side in comparison.candidates:
        text[side.label].append(f"{len(side.measured_ids)} / {len(side.run_ids)}")
        text[f"Δ {side.label}"].append("")
        text[f"verdict {side.label}"].append("")
    for col in text:
        css[col].append(MUTED)
    for metric in comparison.metrics:
        text["metric"].append(f"{metric.label} ({metric.unit})")
        text["better"].append("↑ higher" if metric.better == "higher" else "↓ lower")
        css["metric"].append("")
        css["better"].append(MUTED)
        text[base_col].append(fmt_value(base.stats(metric.key)["mean"], metric.unit))
        css[base_col].append("")
        for side in comparison.candidates:
            c = comparison.changes.get((side.label, metric.key))
            text[side.label].append(fmt_value(side.stats(metric.key)["mean"], metric.unit))
            css[side.label].append("")
            style = _cell_style(metric, c)
            if c is None or c.rel_change is None:
                text[f"Δ {side.label}"].append("—")
            else:
                text[f"Δ {side.label}"].append(f"{c.rel_change * 100:+.1f} %")
            css[f"Δ {side.label}"].append(style)
            verdict = "" if c is None else VERDICT_LABEL[c.verdict]
            if c is not None and c.rel_low is not None and c.rel_high is not None:
                verdict += f" ({pct} CI {c.rel_low * 100:+.1f} … {c.rel_high * 100:+.1f} %)"
            elif c is not None and c.note:
                verdict += f" ({c.note})"
            text[f"verdict {side.label}"].append(verdict)
            css[f"verdict {side.label}"].append(
                style if c is not None and c.verdict in ("better", "worse") else MUTED
            )
    return pd.DataFrame(text), pd.DataFrame(css)


def render_table(comparison: Comparison, scope_id: int | None) -> None:
    """The side-by-side table, % change coloured by direction, and its CSV / JSON exports."""
    text, css = table_frames(comparison)
    styler = text.style.apply(lambda _frame: css, axis=None)
    with st.container(key="cmp_table"):
        st.markdown("#### Side by side")
        st.caption(
            "Values are the mean over each side's runs; Δ is the candidate's change of the "
            "mean vs the baseline (green = in the better direction, red = worse; bold when "
            "the verdict is clear). Verdict: 95 % CI of the change, the wider of a bootstrap "
            "over runs (2000 resamples) and Welch's t-interval; one run per side is *inconclusive*; a change under 2 % or a "
            "CI that includes 0 is *no clear difference*."
        )
        st.dataframe(styler, hide_index=True, key="cmp_table_df")
        c1, c2, _ = st.columns([1, 1, 4])
        c1.download_button(
            "Table as CSV",
            data=lambda: export.comparison_csv(comparison),
            file_name=export.export_name(scope_id, "table", "csv"),
            mime=export.MIME["csv"],
            key="dl_csv_table",
            on_click="ignore",
        )
        c2.download_button(
            "Table as JSON",
            data=lambda: export.comparison_json(comparison),
            file_name=export.export_name(scope_id, "table", "json"),
            mime=export.MIME["json"],
            key="dl_json_table",
            on_click="ignore",
        )


def _export_buttons(chart: Any, kind: str, scope_id: int | None) -> None:
    cols = st.columns([1, 1, 1, 5])
    for col, fmt in zip(cols, ("png", "svg", "html")):
        col.download_button(
            fmt.upper(),
            data=_renderer(chart, fmt),
            file_name=export.export_name(scope_id, kind, fmt),
            mime=export.MIME[fmt],
            key=f"dl_{fmt}_{kind}",
            on_click="ignore",
            help="standalone, opens offline" if fmt == "html" else None,
        )


def _renderer(chart: Any, fmt: str) -> Callable[[], bytes]:
    """Deferred: the file is rendered only when its button is clicked."""
    return lambda: export.render(chart, fmt)


def render_charts(db: Any, comparison: Comparison, scope_id: int | None) -> None:
    """Every chart with PNG / SVG / HTML export; options above them."""
    st.markdown("#### Charts")
    o1, o2, o3 = st.columns(3)
    error = o1.radio(
        "Error bars",
        ["ci", "minmax"],
        key="cmp_error",
        horizontal=True,
        format_func=lambda x: {"ci": "95 % CI of the mean", "minmax": "min–max of runs"}[x],
    )
    align_default = ch.default_align(comparison)
    align = o2.radio(
        "Time axis",
        ["server", "load"],
        key="cmp_align",
        horizontal=True,
        index=0 if align_default == "server" else 1,
        format_func=lambda x: {"server": "since server start", "load": "since load start"}[x],
    )
    ids = [rid for s in comparison.sides for rid in s.measured_ids]
    have = available_series(db, ids)
    mem_options = [name for name, _ in ch.MEMORY_SERIES if name in have]
    memory = None
    if mem_options:
        memory = o3.selectbox(
            "Memory series",
            mem_options,
            key="cmp_memory_series",
            format_func=lambda n: dict(ch.MEMORY_SERIES)[n],
        )
    for kind in ("throughput", "latency", "knee", "cdf", "memory", "kv"):
        chart = ch.build_chart(db, comparison, kind, error=error, align=align, memory_series=memory)
        if chart is None:
            continue
        with st.container(key=f"cmp_chart_{kind}", border=True):
            st.markdown(f"**{ch.CHART_TITLES[kind]}**")
            if kind in ("memory", "kv"):
                st.caption(
                    ch.PREALLOCATION_NOTE + " Compare KV capacity (tokens) and peak KV "
                    "usage in the table, not the memory curve's height under load."
                )
            st.altair_chart(chart, key=f"chart_{kind}")
            _export_buttons(chart, kind, scope_id)


def render_definitions() -> None:
    with st.expander("How each number is computed (vLLM's definitions)", expanded=False):
        st.markdown(
            "\n".join(
                f"- **{m.label}** ({m.unit}, {m.better} is better): {m.formula}" for m in METRICS
            )
        )
        st.markdown(
            "- Percentiles use linear interpolation over the run's requests (ITL over all "
            "chunks). Each run's numbers are stored when it finishes; goodput is "
            "recomputed from the stored request rows for the SLOs above."
        )
