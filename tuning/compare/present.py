"""How numbers and verdicts read, written once for the Compare page, the CLI and the HTML report.

One formatter by unit (`fmt`), the verdict words (`VERDICT_LABEL`), the sentence that states the
verdict rule (built from the constants the rule uses, so it cannot drift from them), the
comparability, noise and failure notes, and the cells of the side-by-side table. The callers only
decide how to draw: a Streamlit dataframe, an aligned text table, an HTML table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from core.failure_kinds import failure_words
from core.units import NONE as NONE
from core.units import fmt as fmt  # re-exported: the Compare page, CLI and report import it here
from tuning.compare.catalog import METRIC_BY_KEY, Metric
from tuning.compare.chunks import chunk_note, is_per_chunk
from tuning.compare.comparison import Comparison
from tuning.compare.noise import noise_floor
from tuning.compare.stats import (
    CONFIDENCE,
    MARGIN,
    MIN_RUNS,
    POWER,
    RESAMPLES,
    Change,
    VerdictName,
)
from tuning.engine.params import show_value

VERDICT_LABEL: dict[VerdictName, str] = {
    "better": "▲ better",
    "worse": "▼ worse",
    "changed": "≠ changed",
    "equivalent": "= equivalent",
    "undecided": "undecided",  # no glyph: a "?" read as a missing value, not as a verdict
    "not applied": "⊘ not applied",
}
# The verdicts that say a change is real, in a direction.
CLEAR: frozenset[str] = frozenset({"better", "worse"})
# Metrics whose run-to-run spread the noise note reports.
NOISE_METRICS = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
# An interval wider than this (as a relative change, hi - lo) says how few runs and how much
# spread stand behind it, beside it.
WIDE = 1.0
# What the table and the summaries call a metric that is not primary.
INFORMATION = "for information, not corrected"

# How a cell looks: green / red only for a decided better / worse verdict; everything else
# (undecided, equivalent, not applied, no verdict) is the one neutral grey, never tinted by the
# direction of a change the verdict does not stand behind.
Tone = Literal["", "muted", "better", "worse"]
# The colours of the tones, defined once: the Compare page's table (CSS), the HTML report's
# classes (`tone_css`) and the page's summary lines (Streamlit's colour names).
TONE_COLOR: dict[Tone, str] = {"": "", "muted": "#6e7781", "better": "#1a7f37", "worse": "#cf222e"}
TONE_CSS: dict[Tone, str] = {
    "": "",
    "muted": f"color: {TONE_COLOR['muted']}",
    "better": f"color: {TONE_COLOR['better']}; font-weight: 600",
    "worse": f"color: {TONE_COLOR['worse']}; font-weight: 600",
}
TONE_MARK: dict[Tone, str] = {"": "", "muted": "gray", "better": "green", "worse": "red"}
Mark = Callable[[str], str]


def _plain(text: str) -> str:
    return text


def pct_number(percent: float) -> str:
    """A signed percentage's number, one decimal: 10.24 -> '+10.2'. A change above -100 % (a
    ratio's lower bound on the log scale always is) never reads '-100.0': it gets the decimals
    that keep it above ('-99.99'), since -100 % would mean the metric fell to zero."""
    text = f"{percent:+.1f}"
    digits = 1
    while percent > -100.0 and float(text) <= -100.0 and digits < 6:
        digits += 1
        text = f"{percent:+.{digits}f}"
    return text


def pct_text(fraction: float | None) -> str:
    """A relative change as a signed percentage: 0.102 -> '+10.2 %'."""
    return NONE if fraction is None else f"{pct_number(fraction * 100)} %"


def diff_text(value: float | None, unit: str = "") -> str:
    """A change in the metric's own unit, signed: '+2 count', '+0.3 pp' for a fraction (points
    of a percentage), '-1.5 GiB'."""
    if value is None:
        return NONE
    sign = "+" if value >= 0 else "-"
    if unit == "fraction":
        points = value * 100
        return f"{points:+.2f} pp" if abs(points) < 1 else f"{points:+.1f} pp"
    return sign + fmt(abs(value), unit)


def change_text(change: Change | None, unit: str = "") -> str:
    """The change a table or a sentence shows: a % for a ratio, the difference in the metric's
    unit when the metric is read as one or its baseline is 0 (never '+100 %' from 0.0 %)."""
    if change is None:
        return NONE
    if change.rel_change is not None:
        return pct_text(change.rel_change)
    return diff_text(change.diff, unit)


def margin_text(margin: float) -> str:
    """The equivalence margin as shown: '±2 %'."""
    return f"±{margin * 100:g} %"


def level_text(confidence: float) -> str:
    """'95 %', '98.3 %': a confidence as the intervals name it."""
    pct = confidence * 100
    return f"{pct:.0f} %" if abs(pct - round(pct)) < 0.05 else f"{pct:.1f} %"


def spread_text(change: Change) -> str:
    """'2 + 2 runs, run-to-run CV 31 % / 44 %': what a wide interval rests on."""
    cvs = [change.cv("base"), change.cv("cand")]
    spread = " / ".join(f"{c * 100:.0f} %" for c in cvs if c is not None)
    return f"{change.n_base} + {change.n_cand} runs" + (
        f", run-to-run CV {spread}" if spread else ""
    )


def ci_text(
    change: Change | None, confidence: float | None = None, unit: str = "", spread: bool = True
) -> str:
    """'95 % CI +8.1 … +12.3 %' at the level the interval was computed at (the change's own), in
    the metric's unit for a difference ('95 % CI +1 … +3 count'); a huge interval (wider than
    100 points) says its runs and spread beside it; '' when there is no interval."""
    if change is None:
        return ""
    level = level_text(change.confidence)
    if change.rel_low is not None and change.rel_high is not None:
        low, high = pct_number(change.rel_low * 100), pct_number(change.rel_high * 100)
        text = f"{level} CI {low} … {high} %"
        if spread and is_wide(change):
            text += f" — wide: {spread_text(change)}"
        return text
    if change.diff_low is None or change.diff_high is None:
        return ""
    return f"{level} CI {diff_text(change.diff_low, unit)} … {diff_text(change.diff_high, unit)}"


def is_wide(change: Change) -> bool:
    """An interval wider than 100 points: what it rests on is said beside it."""
    low, high = change.rel_low, change.rel_high
    return low is not None and high is not None and high - low > WIDE


def _decided_by(
    change: Change, confidence: float, unit: str = "", spread: bool = True
) -> list[str]:
    """A verdict's interval, the margin of an equivalence and the change's note."""
    parts = [ci_text(change, confidence, unit, spread)]
    if change.verdict == "equivalent" and change.rel_low is not None:  # a relative margin
        parts.append(f"within {margin_text(change.margin)}")
    return [p for p in (*parts, change.note) if p]


def verdict_detail(change: Change, confidence: float = CONFIDENCE, unit: str = "") -> str:
    """What stands behind a verdict: its interval, the margin for an equivalence, the reason
    and the repeat estimate for an undecided one."""
    more = [change.more.text] if change.more is not None else []
    return "; ".join(_decided_by(change, confidence, unit) + more)


def verdict_text(change: Change | None, confidence: float = CONFIDENCE, unit: str = "") -> str:
    """'▼ worse (95 % CI +8.1 … +12.3 %)', 'undecided (95 % CI …; ≈ 2 more runs a side
    would likely decide it)', '= equivalent (95 % CI -0.4 … +0.9 %; within ±2 %)'."""
    if change is None:
        return ""
    detail = verdict_detail(change, confidence, unit)
    return VERDICT_LABEL[change.verdict] + (f" ({detail})" if detail else "")


def verdict_cell(change: Change | None, confidence: float = CONFIDENCE, unit: str = "") -> str:
    """The table's verdict cell: `verdict_text` without the repeat estimate and a wide
    interval's runs and spread, which have a column of their own (`aside_cell`: a narrow window
    then still shows the whole verdict)."""
    if change is None:
        return ""
    detail = "; ".join(_decided_by(change, confidence, unit, spread=False))
    return VERDICT_LABEL[change.verdict] + (f" ({detail})" if detail else "")


def aside_cell(change: Change | None) -> str:
    """Beside the verdict: what would decide an undecided change, and what a wide interval rests
    on ('wide: 2 + 2 runs, run-to-run CV 31 % / 44 %')."""
    if change is None:
        return ""
    parts = [change.more.text] if change.more is not None else []
    parts += [f"wide: {spread_text(change)}"] if is_wide(change) else []
    return "; ".join(parts)


def tone(metric: Metric, change: Change | None) -> Tone:
    """Green for a decided change in the better direction, red for the worse; the neutral grey
    for anything not decided better or worse (an undecided change leans nowhere, and a metric
    with no better direction is never coloured)."""
    if change is None or change.verdict not in CLEAR or metric.better == "neither":
        return "muted"
    return "better" if change.verdict == "better" else "worse"


def direction_cell_text(metric: Metric) -> str:
    """'↑ higher', '↓ lower' or '· neither' (no better direction)."""
    return {"higher": "↑ higher", "lower": "↓ lower"}.get(metric.better, "· neither")


def tone_css(selector: Callable[[Tone], str] = lambda t: f".{t}") -> str:
    """The tones as CSS rules ('.better{color: ...}'), for a page that styles by class."""
    return "".join(f"{selector(t)}{{{css}}}" for t, css in TONE_CSS.items() if t)


def verdict_rule(
    mark: Mark = _plain, confidence: float = CONFIDENCE, margin: float = MARGIN
) -> str:
    """The rule in one sentence, from the constants it uses; `mark` emphasises verdict names."""
    return (
        f"Verdict: {confidence * 100:.0f} % CI of the change of the mean over runs, the wider of "
        f"a bootstrap ({RESAMPLES} resamples) and Welch's t-interval, on the log scale of the "
        f"ratio when every run is above 0 (so a % change never reads below -100 %), else of the "
        f"difference. A CI within {margin_text(margin)} is {mark('equivalent')}; a CI that "
        f"excludes no change is {mark('better')} or {mark('worse')}; anything else, and fewer "
        f"than {MIN_RUNS} measured runs on a side, is {mark('undecided')}, with the further runs "
        f"a side that would likely decide it (from the observed spread, {int(POWER * 100)} % "
        f"power)."
    )


def comparability_text(comparison: Comparison, mark: Mark = _plain) -> str:
    """Either 'All N runs are comparable: ...' or how many runs were left out and why; runs read
    from a result file are said first (imported_text): comparability cannot vouch for what the
    file does not hold, so the line claims only what was checked."""
    n = comparison.run_count
    excluded = comparison.excluded
    imported = imported_text(comparison, mark)
    first = f"{imported} " if imported else ""
    if excluded:
        return first + (
            f"{len(excluded)} run(s) left out: not comparable with baseline run "
            f"{excluded[0].baseline_id}. {n} run(s) compared."
        )
    what = f" — parameter {mark(comparison.param)}" if comparison.param else ""
    if imported:
        return first + (
            f"Of what is known, all {n} runs agree: same workload fingerprint (as the files "
            f"describe the load) and model{what}." + _node_note(comparison)
        )
    return (
        f"All {n} runs are comparable: same workload fingerprint, model, engine and vLLM "
        f"version, hardware; exactly one parameter differs{what}." + _node_note(comparison)
    )


def _node_note(comparison: Comparison) -> str:
    """' Note: values ran on N different nodes (...)' for fleet runs spread over machines."""
    warnings = [w for c in comparison.checks for w in c.warnings]
    if not warnings:
        return ""
    return f" Warning: values ran on different nodes ({len(warnings)} run(s)): {warnings[0]}."


def failed_text(comparison: Comparison) -> str | None:
    """The runs that produced no measurement (kept as results), in one line."""
    failed = [(s.label, f) for s in comparison.sides for f in s.failed]
    if not failed:
        return None
    return "Runs without a measurement (kept as results): " + "; ".join(
        f"run {f['run_id']} ({label}): {f['status']}"
        + (f" [{failure_words(f['kind'])}]" if f.get("kind") else "")  # the key in words
        for label, f in failed
    )


def suspect_text(comparison: Comparison) -> str | None:
    """The suspect runs (numbers from outside that cannot be true): left out, or counted because
    the user included them, each with why it is suspect; None when there is none."""
    left = [
        f"run {f['run_id']}: {f.get('reason') or 'suspect'}"
        for s in comparison.sides
        for f in s.failed
        if f.get("status") == "suspect"
    ]
    counted = [text for s in comparison.sides for text in s.suspect]
    parts = []
    if left:
        parts.append("Suspect runs, not counted in the verdicts: " + "; ".join(left) + ".")
    if counted:
        parts.append("Counted although suspect (included by choice): " + "; ".join(counted) + ".")
    return " ".join(parts) or None


def not_applied_text(comparison: Comparison) -> str | None:
    """The sides whose value the engine did not run with, and why: they get no verdict."""
    sides = [s for s in comparison.sides if s.not_applied]
    if not sides:
        return None
    return "Not applied by the engine, so no verdict for the side(s) concerned: " + "; ".join(
        f"{s.label}: {' / '.join(s.not_applied)}" for s in sides
    )


def reused_text(comparison: Comparison) -> str | None:
    """The runs counted from earlier experiments (same fingerprint) rather than measured again."""
    reused = [text for s in comparison.sides for text in s.reused]
    if not reused:
        return None
    return (
        f"Reused from earlier runs (not measured again): {len(reused)} of "
        f"{comparison.run_count} runs; " + "; ".join(reused)
    )


def imported_text(comparison: Comparison, mark: Mark = _plain) -> str | None:
    """The runs read from another tool's file, and what their fingerprint lacks (the engine, its
    vLLM version, the hardware and the server's configuration beyond the named parameter), said
    once, in the comparability line (comparability_text); None when no run was imported. The
    runs' names (their tool, from the store) go through `mark`, which escapes for the page."""
    imported = [mark(text) for s in comparison.sides for text in s.imported]
    if not imported:
        return None
    param = mark(comparison.param) if comparison.param else "the parameter named at import"
    return (
        f"Imported from result files: {len(imported)} of {comparison.run_count} runs "
        f"({'; '.join(imported)}). Their fingerprint is incomplete: the file does not hold the "
        f"engine, its vLLM version, the hardware or the server's configuration beyond {param}, "
        f"so these are unknown, and that only {param} differs is the importer's word, not "
        "checked."
    )


def noise_text(comparison: Comparison) -> str | None:
    """The baseline's run-to-run spread (A/A) and the smallest change it lets a verdict resolve
    with as many runs a side, by the t and the power of the repeat estimate."""
    floors = [(k, noise_floor(comparison.baseline.values.get(k) or [])) for k in NOISE_METRICS]
    parts = [
        f"{METRIC_BY_KEY[k].label}: run-to-run CV {x.cv * 100:.1f} %, smallest resolvable change "
        f"≈ {x.min_detectable * 100:.1f} %"
        for k, x in floors
        if x.cv is not None and x.min_detectable is not None
    ]
    if not parts:
        return None
    n, t = floors[0][1].n, next((x.t for _, x in floors if x.t is not None), None)
    how = f" (t = {t:.2f} at {n} runs a side, {int(POWER * 100)} % power)" if t else ""
    return f"Noise floor from the baseline's {n} repeats (A/A){how}: " + ", ".join(parts)


def drift_text(comparison: Comparison) -> str | None:
    """The baseline's first run vs its last (same configuration: the machine's drift), for the
    headline metrics, beside the verdicts; a drift past the equivalence margin is said so."""
    drifts = [d for d in comparison.drift if d.metric in NOISE_METRICS and d.rel_change is not None]
    if not drifts:
        return None
    parts = ", ".join(f"{METRIC_BY_KEY[d.metric].label} {pct_text(d.rel_change)}" for d in drifts)
    worst = max(abs(d.rel_change or 0.0) for d in drifts)
    warn = (
        f"; more than the {margin_text(comparison.margin)} margin: the machine drifted (the "
        "A B B A order cancels a steady drift, not a jump)"
        if worst > comparison.margin
        else ""
    )
    first, last = drifts[0].first_run, drifts[0].last_run
    return f"Drift of the baseline, first run {first} → last run {last}: {parts}{warn}."


def slo_text(slo_ms: dict[str, float]) -> str | None:
    if not slo_ms:
        return None
    return "Goodput SLOs: " + ", ".join(f"{k} ≤ {v:g} ms" for k, v in slo_ms.items())


# --------------------------------------------------------------------------------------------
# The side-by-side table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    text: str
    tone: Tone = ""
    numeric: bool = False
    title: str = ""


def side_heading(comparison: Comparison, side: Any) -> str:
    """A side's short column heading: its value as people read it ('16 GiB'); the parameter
    is said once above the table. The whole label where values alone would not tell the sides
    apart (an A/A repeat, a side without a parameter)."""
    short = {id(s): show_value(s.param, s.value) if s.param else s.label for s in comparison.sides}
    if len(set(short.values())) < len(comparison.sides) or "(A/A repeat)" in side.label:
        return str(side.label)
    return str(short[id(side)])


def table_columns(comparison: Comparison) -> list[str]:
    """The metric, then what was decided (each candidate's Δ, verdict, and what would decide an
    undecided one), then the side means, the baseline's first, the direction, and the metric's
    role last (objective, guard, or for information, not corrected): a narrow window shows the
    verdicts, not only the baseline's column."""
    heads = [side_heading(comparison, s) for s in comparison.sides]
    cols = ["metric"]
    for head in heads[1:]:
        cols += [f"Δ {head}", f"verdict {head}", f"to decide {head}"]
    return [*cols, f"{heads[0]} (baseline)", *heads[1:], "better", "role"]


def table_rows(comparison: Comparison, with_units: bool = True) -> list[list[Cell]]:
    """Rows of `table_columns`: the run counts first, then one row per metric (side means).
    Without units, a metric's name is its label alone (the page: each mean carries its own
    unit, and a narrower name keeps the metric, Δ and verdict columns in a 1024 px window)."""
    base, candidates = comparison.baseline, comparison.candidates
    blank = Cell("", "muted")

    def runs(side: Any) -> Cell:
        return Cell(f"{len(side.measured_ids)} / {len(side.run_ids)}", "muted", True)

    rows = [
        [Cell("runs (measured / total)", "muted"), *[blank] * (3 * len(candidates))]
        + [runs(base), *map(runs, candidates), blank, blank]
    ]
    chunks = chunk_note(comparison)  # beside every ITL row when the sides' chunks differ
    for metric in comparison.metrics:
        decided: list[Cell] = []
        for side in candidates:
            change = comparison.changes.get((side.label, metric.key))
            shade = tone(metric, change)
            decided += [
                Cell(change_text(change, metric.unit), shade, True),
                Cell(verdict_cell(change, comparison.confidence, metric.unit), shade),
                Cell(aside_cell(change), "muted"),
            ]
        means = [
            Cell(fmt(s.stats(metric.key)["mean"], metric.unit), numeric=True)
            for s in (base, *candidates)
        ]
        direction = Cell(direction_cell_text(metric), "muted")
        role = comparison.roles.get(metric.key, INFORMATION)
        label = f"{metric.label} ({metric.unit})" if with_units else metric.label
        name = Cell(label, title=metric.formula)
        if chunks and is_per_chunk(metric):
            name = Cell(
                f"{name.text} · chunk size differs", "muted", title=f"{chunks}. {name.title}"
            )
        rows.append(
            [
                name,
                *decided,
                *means,
                direction,
                Cell(role, "" if role != INFORMATION else "muted"),
            ]
        )
    return rows
