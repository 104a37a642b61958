"""Render helpers for the Compare page: each takes domain objects (runs, a Comparison) and draws.

No module-level state; widget keys are stable (`cmp_*`, `dl_*`) so browser tests can find them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

import altair as alt
import pandas as pd
import streamlit as st

from core.status import Status
from tuning.compare.catalog import METRICS
from tuning.compare.comparison import Comparison, default_baseline
from tuning.compare.present import (
    TONE_CSS,
    comparability_text,
    failed_text,
    noise_text,
    reused_text,
    suspect_text,
    table_columns,
    table_rows,
    verdict_rule,
)
from tuning.compare.stats import MARGIN
from tuning.engine.params import run_value
from tuning.present import export
from tuning.present.charts.build import build_chart, default_align, drawn_series
from tuning.present.charts.common import with_context
from tuning.present.charts.kinds import CHART_TITLES, MEMORY_SERIES, PREALLOCATION_NOTE
from tuning.present.report import report_file_name
from ui.common import ICONS, md_escape
from ui.share import report_bytes
from ui.table_focus import table_view

# A dataframe cell's text: 14 px Source Sans, at most ~7 px a character (digits, wide letters),
# with 8 px of padding a side.
VERDICT_PX_PER_CHAR = 7.0
CELL_PADDING_PX = 8
# '+1,212.6 %' and a short heading, in 14 px Source Sans.
CHANGE_WIDTH_PX = 90

# The knee next to the bars it summarises; time series last.
PAGE_ORDER = ("throughput", "latency", "knee", "cdf", "memory", "kv")
NOT_APPLIED = (
    "Not applied by the engine, so no verdict for the side(s) below: their runs measured "
    "another configuration than their label says."
)


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


def default_experiment(experiments: Sequence[Mapping[str, Any]]) -> int:
    """The index (in `experiments`, newest first) Compare opens on: the latest done experiment with
    two or more values (a one-run search step has no candidate side), else the latest with two
    or more values, else the latest done one, else the latest."""

    def values(e: Mapping[str, Any]) -> int:
        return len({repr(v) for v in (e.get("values") or [])})

    for wanted in (
        lambda e: values(e) >= 2 and e.get("status") == "done",
        lambda e: values(e) >= 2,
        lambda e: e.get("status") == "done",
    ):
        found = next((i for i, e in enumerate(experiments) if wanted(e)), None)
        if found is not None:
            return found
    return 0


def run_label(run: Mapping[str, Any]) -> str:
    rep = run.get("repeat_index")
    rep_s = f" · repeat {int(rep) + 1}" if rep is not None else ""
    return f"run {run['id']} · {run.get('param')} = {run_value(run)}{rep_s} · {run.get('status')}"


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
            format_func=labels.__getitem__,
            key=f"cmp_baseline_{scope}",
        )
        rest = [i for i in ids if i not in base]
        cand = right.multiselect(
            "Candidate runs (grouped by value)",
            rest,
            rest,
            labels.__getitem__,
            f"cmp_candidates_{scope}",
        )
    return list(base), [i for i in cand if i not in base]


def slo_inputs() -> dict[str, float]:
    """Goodput SLOs in ms; 0 = not set. Goodput is recomputed from the stored request rows.
    Folded away unless one is set."""
    keys = [f"cmp_slo_{n}" for n in ("ttft", "tpot", "e2el")]
    with st.expander("Goodput SLOs", expanded=any(st.session_state.get(k) for k in keys)):
        return _slo_fields()


def _slo_fields() -> dict[str, float]:
    st.markdown(
        "**Goodput SLOs** (0 = off): a request is *good* when it succeeded and every set "
        "limit holds; goodput = good requests / duration (vLLM's definition, TPOT 0 for "
        "1-token outputs)."
    )
    cols = st.columns(3)
    out: dict[str, float] = {}
    for col, name in zip(cols, ("ttft", "tpot", "e2el"), strict=True):
        value = col.number_input(
            f"{name.upper()} ≤ ms", min_value=0.0, value=0.0, step=10.0, key=f"cmp_slo_{name}"
        )
        if value and value > 0:
            out[name] = float(value)
    return out


def suspect_toggle(runs: Sequence[Mapping[str, Any]]) -> bool:
    """Whether to count suspect runs: a checkbox, shown only when one is among `runs` (off by
    default: their numbers failed a plausibility check)."""
    n = sum(1 for r in runs if r.get("status") == Status.SUSPECT)
    if not n:
        return False
    return st.checkbox(
        f"Count the {n} suspect run{'s' if n != 1 else ''} in the verdicts",
        value=False,
        key="cmp_include_suspect",
        help="A suspect run measured to the end, but a number the server gave cannot be true "
        "(the Runs page says which); it is left out of the sides and verdicts unless counted here.",
    )


def render_knobs() -> tuple[dict[str, float], float]:
    """The SLO fields (folded) and the equivalence margin side by side, in one row: the headline
    under them stays near the top of the page."""
    left, right = st.columns(2)
    with left:
        slo = slo_inputs()
    with right:
        margin = margin_input()
    return slo, margin


def margin_input() -> float:
    """The equivalence margin E as a fraction (the field is in %, default stats.MARGIN)."""
    pct = st.number_input(
        "Equivalence margin ± %",
        min_value=0.1,
        max_value=50.0,
        value=MARGIN * 100,
        step=0.5,
        key="cmp_margin",
        help="A change whose 95 % CI lies within ± this share of the baseline's mean is "
        "'equivalent'; one whose CI excludes 0 is better or worse; anything else is undecided.",
    )
    return float(pct) / 100.0


def render_checks(comparison: Comparison) -> None:
    """Comparability first: a comparison of runs that differ in two ways says nothing."""
    with st.container(key="cmp_checks"):
        excluded = comparison.excluded
        summary = comparability_text(comparison, lambda s: f"**{md_escape(s)}**")
        imported = any(s.imported for s in comparison.sides)  # what a file lacks is unchecked
        if not excluded and not imported:  # all is well: one line
            st.caption(f"{ICONS['ok']} **Comparability:** {summary}")
        else:
            st.warning(f"**Comparability:** {summary}")
            if excluded:
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
        unapplied = [(s.label, why) for s in comparison.sides for why in s.not_applied]
        if unapplied:  # the words come from engine logs, maybe a teammate's: a table, not markdown
            st.warning(NOT_APPLIED)
            frame = pd.DataFrame(unapplied, columns=["side", "why"])
            st.dataframe(frame, hide_index=True, key="cmp_not_applied", width="stretch")
        reused = reused_text(comparison)
        if reused:  # names and hosts may be a teammate's: text, not markdown
            st.info(md_escape(reused))
        suspect = suspect_text(comparison)
        if suspect:  # the words quote a server's numbers: text, not markdown
            st.warning(md_escape(suspect))
        failed = failed_text(comparison)
        noise = noise_text(comparison)
        if failed or noise:
            with st.expander("Failed runs and the baseline's noise floor", expanded=False):
                if failed:  # values and failure kinds from the runs: text, not markdown
                    st.info(md_escape(failed))
                if noise:
                    st.caption(noise)


def table_frames(comparison: Comparison) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(text table, css table) of the same shape: rows = metrics, columns per side; a "to
    decide" column with nothing to say is left out."""
    columns = table_columns(comparison)
    rows = table_rows(comparison, with_units=False)  # each mean says its unit (GiB, not bytes)
    text = pd.DataFrame([[c.text for c in row] for row in rows], columns=columns)
    css = pd.DataFrame([[TONE_CSS[c.tone] for c in row] for row in rows], columns=columns)
    empty = [c for c in columns if c.startswith("to decide ") and not any(text[c])]
    return text.drop(columns=empty), css.drop(columns=empty)


@dataclass(frozen=True)
class ReportRequest:
    """What Compare's report button reports: the runs compared, with the page's baseline and SLOs;
    a whole experiment by its id (the report then opens with it, and is named by it)."""

    db_path: Path
    run_ids: list[int]
    experiment_ids: list[int]
    baseline_ids: list[int]
    slo_ms: dict[str, float] = field(default_factory=dict)

    @property
    def file_name(self) -> str:
        whole = len(self.experiment_ids) == 1 and not self.run_ids
        return report_file_name(self.experiment_ids[0] if whole else None, self.run_ids)


def report_request(
    db_path: Path,
    runs: Sequence[Mapping[str, Any]],
    picked: Sequence[int],
    baseline_ids: Sequence[int],
    slo_ms: Mapping[str, float],
    scope_id: int | None,
) -> ReportRequest:
    """The report of the picked runs; every run of the experiment picked: the experiment's."""
    ids = [int(r["id"]) for r in runs if int(r["id"]) in set(picked)]
    whole = scope_id is not None and len(ids) == len(runs)
    return ReportRequest(
        Path(db_path),
        [] if whole else ids,
        [int(scope_id)] if whole and scope_id is not None else [],
        list(baseline_ids),
        dict(slo_ms),
    )


def report_button(col: Any, request: ReportRequest) -> None:
    """The report (HTML) of what the page compares, built only when clicked (as History's)."""
    col.download_button(
        "Report (HTML)",
        data=report_bytes(
            request.db_path,
            request.run_ids,
            request.experiment_ids,
            request.baseline_ids,
            request.slo_ms,
        ),
        file_name=request.file_name,
        mime=export.MIME["html"],
        key="dl_html_report",
        on_click="ignore",
        help="The whole comparison in one file: cards, verdicts, table, charts, runs; "
        "standalone, opens offline.",
    )


def render_table(
    comparison: Comparison,
    scope_id: int | None,
    report: ReportRequest | None = None,
    extra: Mapping[str, Any] | None = None,
) -> None:
    """The side-by-side table, decided changes coloured by direction, its CSV / JSON exports (the
    JSON with `extra`: the decision record and its words, tuning.present.model) and the report
    of the comparison."""
    text, css = table_frames(comparison)
    with st.container(key="cmp_table"):
        st.markdown("#### Side by side")
        if comparison.param:
            st.caption(f"Values of **{md_escape(comparison.param)}**; metric and verdicts first.")
        shown, tones, order, config = table_view(comparison, text, css, table_widths(text))
        styler = shown.style.apply(lambda _frame: tones, axis=None)
        st.dataframe(
            styler, hide_index=True, key="cmp_table_df", column_config=config, column_order=order
        )
        with st.expander("How to read this table and its verdicts", expanded=False):
            st.caption(
                "Values are the mean over each side's runs; Δ is the candidate's change of the "
                "mean vs the baseline, in % or, for counts and fractions, in the metric's unit "
                "(green / red only when the verdict is better / worse; undecided, equivalent "
                "and not applied are grey). Only the objective and the guards decide, with the "
                "experiment's rule; every other metric is for information, not corrected. "
                + verdict_rule(lambda s: f"*{s}*", comparison.confidence, comparison.margin)
            )
        makers: dict[str, Callable[[], bytes]] = {
            "csv": partial(export.comparison_csv, comparison),
            "json": partial(export.comparison_json, comparison, extra),
        }
        row = st.container(horizontal=True, key="cmp_table_downloads")
        for fmt, make in makers.items():
            _download(row, f"Table as {fmt.upper()}", make, "table", fmt, scope_id)
        if report is not None:
            report_button(row, report)


def verdict_width(texts: Sequence[str]) -> int:
    """Pixels for a verdict column: the longest verdict at VERDICT_PX_PER_CHAR (and room for
    its heading), so no verdict is cut (tests/e2e measures the drawn text)."""
    longest = max((len(t) for t in texts), default=0)
    return max(80, math.ceil(longest * VERDICT_PX_PER_CHAR) + 2 * CELL_PADDING_PX)


def table_widths(text: pd.DataFrame) -> dict[str, Any]:
    """Every verdict column wide enough for its whole verdict and interval, a change column just
    wide enough for '+212.6 %'; the metric column pinned while the rest scrolls."""
    out: dict[str, Any] = {"metric": st.column_config.Column(pinned=True)}
    for column in text.columns:
        if column.startswith(("verdict ", "to decide ")):
            texts = [str(t) for t in text[column]] + [column]
            out[column] = st.column_config.Column(width=verdict_width(texts))
        elif column.startswith("Δ "):
            width = max(CHANGE_WIDTH_PX, verdict_width([column]))
            out[column] = st.column_config.Column(width=width)
    return out


def _download(
    col: Any,
    label: str,
    make: Callable[[], bytes],
    kind: str,
    fmt: str,
    scope_id: int | None,
    help_text: str | None = None,
) -> None:
    """One download button; `make` builds the file only when the button is clicked."""
    col.download_button(
        label,
        data=make,
        file_name=export.export_name(scope_id, kind, fmt),
        mime=export.MIME[fmt],
        key=f"dl_{fmt}_{kind}",
        on_click="ignore",
        help=help_text,
    )


def render_export(chart: alt.TopLevelMixin, fmt: str, context: Sequence[str] = ()) -> bytes:
    """The file of a chart as drawn, with its context under the title (a file travels alone)."""
    return export.chart_bytes(with_context(chart, context), fmt)


def export_buttons(
    chart: Any, kind: str, scope_id: int | None, context: Sequence[str] = ()
) -> None:
    """PNG / SVG / HTML of `chart`, each carrying `context` (tuning.compare.context's lines)."""
    row = st.container(horizontal=True, key=f"cmp_exports_{kind}")
    for fmt in ("png", "svg", "html"):
        note = "standalone, opens offline" if fmt == "html" else None
        make = partial(render_export, chart, fmt, tuple(context))
        _download(row, fmt.upper(), make, kind, fmt, scope_id, note)


def render_charts(
    db: Any, comparison: Comparison, scope_id: int | None, context: Sequence[str] = ()
) -> None:
    """Every chart with PNG / SVG / HTML export; options above them. `context` (model, hardware,
    vLLM, workload) is said once above the charts and carried by every exported file."""
    st.markdown("#### Charts")
    if context:  # from run rows, maybe a teammate's: text, not markdown
        st.caption(md_escape(" · ".join(context)) + " (every exported chart carries this)")
    o1, o2, o3 = st.columns(3)
    error = o1.radio(
        "Error bars",
        ["ci", "minmax"],
        key="cmp_error",
        horizontal=True,
        format_func=lambda x: {
            "ci": "95 % interval of the mean (the verdicts' rule)",
            "minmax": "min–max of runs",
        }[x],
    )
    align_default = default_align(comparison)
    align = o2.radio(
        "Time axis",
        ["server", "load"],
        key="cmp_align",
        horizontal=True,
        index=0 if align_default == "server" else 1,
        format_func=lambda x: {"server": "since server start", "load": "since load start"}[x],
    )
    have = drawn_series(db, comparison.measured_ids)
    mem_options = [name for name, _ in MEMORY_SERIES if name in have]
    memory = None
    if mem_options:
        memory = o3.selectbox(
            "Memory series",
            mem_options,
            key="cmp_memory_series",
            format_func=lambda n: dict(MEMORY_SERIES)[n],
        )
    for kind in PAGE_ORDER:
        chart = build_chart(db, comparison, kind, error=error, align=align, memory_series=memory)
        if chart is None:
            continue
        with st.container(key=f"cmp_chart_{kind}", border=True):
            st.markdown(f"**{CHART_TITLES[kind]}**")
            if kind in ("memory", "kv"):
                st.caption(
                    PREALLOCATION_NOTE + " Compare KV capacity (tokens) and peak KV "
                    "usage in the table, not the memory curve's height under load."
                )
            draw_chart(chart, f"chart_{kind}")
            export_buttons(chart, kind, scope_id, context)


# A spec without `autosize` gets Streamlit's "fit" when it is one view or a layer
# (streamlit/elements/vega_charts.py, _prepare_vega_lite_spec): title, subtitle and axes squeezed
# into the spec's height, which is the plot's. "Output throughput per value" (a title of four
# lines, turned labels, 260 px) drew a plot 0 px tall, no bar and no axis, at 1440 and 1024 px,
# and the toolbar's "Download as PNG" saved that. "fit-x": the width fits the column, the height
# is the plot's own plus its title and axes. The exported files keep Vega's own sizing.
PAGE_AUTOSIZE = {"type": "fit-x", "contains": "padding"}
COMPOSED = ("facet", "concat", "hconcat", "vconcat", "repeat")


def page_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the page draws it: a single or layered view sized by `PAGE_AUTOSIZE` unless
    it says how itself (compositions are left to Streamlit)."""
    if "autosize" not in spec and not any(k in spec for k in COMPOSED):
        spec = {**spec, "autosize": dict(PAGE_AUTOSIZE)}
    return spec


class _Checked:
    """An Altair chart as st.altair_chart reads it (Streamlit calls only `to_dict()`), its spec
    made without Altair's JSON-schema check (the check took 0.03 of the page's 0.23 CPU
    seconds: benchmarks/compare_page_speed.py; tests/tuning/charts/test_build.py checks every
    chart kind's spec), sized for the page (`page_spec`)."""

    def __init__(self, chart: Any) -> None:
        self.chart = chart

    def to_dict(self) -> dict[str, Any]:
        return page_spec(dict(self.chart.to_dict(validate=False)))


def draw_chart(chart: Any, key: str) -> None:
    """Draw an Altair chart built by tuning/present/charts (spec checked by its tests, not here)."""
    st.altair_chart(cast(Any, _Checked(chart)), key=key)


def render_definitions() -> None:
    with st.expander("How each number is computed (vLLM's definitions)", expanded=False):
        st.markdown("\n".join(f"- {m.definition}" for m in METRICS))
        st.markdown(
            "- Percentiles use linear interpolation over the run's requests (ITL over all "
            "chunks). Each run's numbers are stored when it finishes; goodput is "
            "recomputed from the stored request rows for the SLOs above."
        )
