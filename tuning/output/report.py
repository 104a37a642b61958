"""One standalone HTML report of an experiment or a comparison, to mail, attach or archive.

It holds what the Compare page shows: comparability, configuration diff, the side-by-side table
with verdicts, every chart, and the runs with who ran them where. Charts are inline SVG rendered
by vl-convert in-process (no JavaScript at all), and a Content-Security-Policy of
``default-src 'none'`` tells the browser to fetch nothing, so the file opens on a closed network
and a teammate's text inside it cannot run. Every string from the DB is HTML-escaped and
secret-scrubbed (run rows may come from imported bundles).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.redact import env_secrets, scrub_text
from store import queries
from store.db import StoreError, open_db
from tuning.charts import build as ch
from tuning.compare.comparison import (
    METRICS,
    VERDICT_LABEL,
    WORKLOAD_PARAMS,
    Comparison,
    Metric,
    build_comparison,
    default_baseline,
    fmt_value,
    noise_floor,
    run_config,
    run_workload,
)
from tuning.output.export import chart_svg, network_references

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
LOG_TAIL_CHARS = 3000
_EXTRA_COLUMNS = (
    "origin",
    "hardware",
    "vllm_version",
    "engine",
    "started_at",
    "finished_at",
    "failure_reason",
    "failure_hint",
    "log_tail",
    "base_url",
)

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Liberation Sans",sans-serif;
margin:2rem auto;max-width:1200px;padding:0 1rem;color:#1f2328;line-height:1.45}
h1{margin-bottom:.2rem}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2rem;margin-top:2rem}
.meta{color:#6e7781}table{border-collapse:collapse;margin:.5rem 0;font-size:.92rem}
th,td{border:1px solid #d0d7de;padding:.25rem .5rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.better{color:#1a7f37;font-weight:600}.worse{color:#cf222e;font-weight:600}
.faint-better{color:#1a7f37}.faint-worse{color:#cf222e}.muted{color:#6e7781}
.ok{background:#dafbe1;padding:.5rem;border-radius:6px}
.warn{background:#fff8c5;padding:.5rem;border-radius:6px}
tr.changed td{background:#fff8c5}
figure.chart{margin:1rem 0;padding:.5rem;border:1px solid #d0d7de;border-radius:6px;
overflow-x:auto}figure.chart svg{max-width:100%;height:auto}
figcaption{font-weight:600;margin-bottom:.3rem}pre{background:#f6f8fa;padding:.5rem;
overflow-x:auto;font-size:.8rem;white-space:pre-wrap}code{font-size:.9em}
"""


class ReportError(ValueError):
    """Nothing to report: no runs named, or a run or experiment that does not exist."""


def _e(value: Any) -> str:
    """Escaped text for HTML (None -> an em dash)."""
    if value is None or value == "":
        return "—"
    return html.escape(str(value), quote=True)


def report_file_name(experiment_id: int | None = None, run_ids: Sequence[int] = ()) -> str:
    """'report-exp12.html' or 'report-runs-3-4-5.html': from ids only, never from user text."""
    if experiment_id is not None:
        return f"report-exp{int(experiment_id)}.html"
    ids = [str(int(i)) for i in run_ids]
    if not ids:
        return "report-selection.html"
    return "report-runs-" + "-".join(ids[:8]) + ("-more" if len(ids) > 8 else "") + ".html"


# --------------------------------------------------------------------------------------------
# Inline SVG
# --------------------------------------------------------------------------------------------

_ID = re.compile(r'\bid="([^"]+)"')


def inline_svg(svg: str, prefix: str) -> str:
    """An SVG document as an element of the page: no XML prolog, ids made unique per chart so
    two charts' clip paths cannot collide, and nothing active left in it."""
    text = re.sub(r"^\s*<\?xml[^>]*\?>\s*", "", svg)
    text = re.sub(r"<!DOCTYPE[^>]*>", "", text)
    ids = set(_ID.findall(text))
    for ident in sorted(ids, key=len, reverse=True):
        esc = re.escape(ident)
        text = re.sub(rf'\bid="{esc}"', f'id="{prefix}-{ident}"', text)
        text = re.sub(rf"url\(#{esc}\)", f"url(#{prefix}-{ident})", text)
        text = re.sub(rf'href="#{esc}"', f'href="#{prefix}-{ident}"', text)
    # Belt and braces (the CSP already forbids scripts): no script elements, no on* handlers.
    text = re.sub(r"<script\b.*?</script\s*>", "", text, flags=re.IGNORECASE | re.DOTALL)
    text = re.sub(r"\son[a-z]+\s*=\s*(\"[^\"]*\"|'[^']*')", "", text, flags=re.IGNORECASE)
    return text


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def _side_config(run: Mapping[str, Any]) -> dict[str, Any]:
    """Server config plus the workload's tunable fields, under their registry names."""
    cfg = dict(run_config(run))
    wl = run_workload(run)
    for name, fld in WORKLOAD_PARAMS.items():
        if fld in wl:
            cfg[name] = wl[fld]
    return cfg


def _config_section(comparison: Comparison, by_id: Mapping[int, Mapping[str, Any]]) -> str:
    sides = comparison.sides
    cfgs = []
    for side in sides:
        run = by_id.get(side.run_ids[0]) if side.run_ids else None
        cfgs.append(_side_config(run) if run else {})
    keys = sorted(set().union(*[set(c) for c in cfgs])) if cfgs else []

    def norm(v: Any) -> str:
        return "unset" if v is None else str(v)

    changed = [k for k in keys if len({norm(c.get(k)) for c in cfgs}) > 1]
    head = "".join(f"<th>{_e(s.label)}</th>" for s in sides)
    rows = []
    for key in changed:
        cells = "".join(f"<td>{_e(norm(c.get(key)))}</td>" for c in cfgs)
        rows.append(f'<tr class="changed"><td><code>{_e(key)}</code></td>{cells}</tr>')
    if rows:
        diff = (
            f"<p>Parameters that differ between the sides (everything else is the same):</p>"
            f'<table id="config-diff"><tr><th>parameter</th>{head}</tr>{"".join(rows)}'
            "</table>"
        )
    else:
        diff = '<p id="config-diff">One configuration only: no parameter differs.</p>'
    base = cfgs[0] if cfgs else {}
    ref = by_id.get(sides[0].run_ids[0]) if sides and sides[0].run_ids else None
    full = "".join(
        f"<tr><td><code>{_e(k)}</code></td><td>{_e(norm(v))}</td></tr>"
        for k, v in sorted(base.items())
    )
    wl = run_workload(ref) if ref else {}
    wl_rows = "".join(
        f"<tr><td><code>{_e(k)}</code></td><td>{_e(norm(v))}</td></tr>"
        for k, v in sorted(wl.items())
    )
    fingerprint = ref.get("workload_fingerprint") if ref else None
    return (
        f'<section id="configuration"><h2>Configuration</h2>{diff}'
        f"<details><summary>Baseline configuration and workload (fingerprint "
        f"<code>{_e(fingerprint)}</code>)</summary><table><tr><th>parameter</th>"
        f"<th>value</th></tr>{full}</table><table><tr><th>workload</th><th>value</th></tr>"
        f"{wl_rows}</table></details></section>"
    )


def _checks_section(comparison: Comparison) -> str:
    n = sum(len(s.run_ids) for s in comparison.sides)
    parts = ['<section id="comparability"><h2>Comparability</h2>']
    if not comparison.excluded:
        what = f" — parameter <b>{_e(comparison.param)}</b>" if comparison.param else ""
        parts.append(
            f'<p class="ok">All {n} runs are comparable: same workload fingerprint, '
            f"model, engine and vLLM version, hardware; exactly one parameter "
            f"differs{what}.</p>"
        )
    else:
        parts.append(
            f'<p class="warn">{len(comparison.excluded)} run(s) left out: not '
            f"comparable with baseline run {comparison.excluded[0].baseline_id}. "
            f"{n} run(s) compared.</p>"
        )
        rows = "".join(
            f"<tr><td>{c.run_id}</td><td>{c.baseline_id}</td><td>{_e(c.reason)}</td></tr>"
            for c in comparison.excluded
        )
        parts.append(
            f'<table id="not-comparable"><tr><th>run</th><th>baseline run</th>'
            f"<th>why not comparable</th></tr>{rows}</table>"
        )
    failed = [(s.label, f) for s in comparison.sides for f in s.failed]
    if failed:
        parts.append(
            "<p>Runs without a measurement (kept as results): "
            + "; ".join(
                f"run {f['run_id']} ({_e(label)}): {_e(f['status'])}"
                + (f" [{_e(f['kind'])}]" if f.get("kind") else "")
                for label, f in failed
            )
            + "</p>"
        )
    nf = [
        (key, noise_floor(comparison.baseline.values.get(key) or []))
        for key in ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
    ]
    nf = [(k, x) for k, x in nf if x.min_detectable is not None and x.cv is not None]
    if nf:
        parts.append(
            f'<p class="muted">Noise floor from the baseline\'s {nf[0][1].n} repeats '
            "(A/A): "
            + ", ".join(
                f"{_e(k)}: run-to-run CV {x.cv * 100:.1f} %, smallest resolvable change "
                f"≈ {(x.min_detectable or 0) * 100:.1f} %"
                for k, x in nf
            )
            + "</p>"
        )
    if comparison.slo_ms:
        parts.append(
            "<p>Goodput SLOs: "
            + ", ".join(f"{_e(k)} ≤ {v:g} ms" for k, v in comparison.slo_ms.items())
            + "</p>"
        )
    parts.append("</section>")
    return "".join(parts)


def _css_class(metric: Metric, change: Any) -> str:
    if change is None or change.rel_change is None or change.rel_change == 0:
        return "muted"
    good = (change.rel_change > 0) == (metric.better == "higher")
    if change.verdict in ("better", "worse"):
        return "better" if good else "worse"
    return "faint-better" if good else "faint-worse"


def _verdicts_section(comparison: Comparison) -> str:
    parts = ['<section id="verdicts"><h2>Verdicts</h2>']
    if not comparison.candidates:
        parts.append("<p>No candidate side: only one configuration among these runs.</p>")
    pct = f"{comparison.confidence * 100:.0f} %"
    for side in comparison.candidates:
        items = []
        counts: dict[str, int] = {}
        for metric in comparison.metrics:
            c = comparison.changes.get((side.label, metric.key))
            if c is None:
                continue
            counts[c.verdict] = counts.get(c.verdict, 0) + 1
            if c.verdict in ("better", "worse"):
                ci = ""
                if c.rel_low is not None and c.rel_high is not None:
                    ci = f" ({pct} CI {c.rel_low * 100:+.1f} … {c.rel_high * 100:+.1f} %)"
                change = "n/a" if c.rel_change is None else f"{c.rel_change * 100:+.1f} %"
                items.append(
                    f'<li class="{c.verdict}">{VERDICT_LABEL[c.verdict]}: '
                    f"{_e(metric.label)} {change}{ci}</li>"
                )
        rest = ", ".join(
            f"{n} {_e(v)}" for v, n in sorted(counts.items()) if v not in ("better", "worse")
        )
        parts.append(f"<h3>{_e(side.label)} vs {_e(comparison.baseline.label)}</h3>")
        parts.append(
            f"<ul>{''.join(items)}</ul>"
            if items
            else "<p>No metric is clearly better or worse.</p>"
        )
        if rest:
            parts.append(f'<p class="muted">Other metrics: {rest}.</p>')
    parts.append(
        '<p class="muted">Verdict: 95 % CI of the change of the mean, the wider of a '
        "bootstrap over runs (2000 resamples) and Welch's t-interval; one run per side is <i>inconclusive</i>; a change under "
        "2 % or a CI that includes 0 is <i>no clear difference</i>.</p></section>"
    )
    return "".join(parts)


def _table_section(comparison: Comparison) -> str:
    pct = f"{comparison.confidence * 100:.0f} %"
    base = comparison.baseline
    head = [f"<th>metric</th><th>better</th><th>baseline: {_e(base.label)}</th>"]
    for side in comparison.candidates:
        head.append(f"<th>{_e(side.label)}</th><th>Δ</th><th>verdict</th>")
    rows = ["<tr>" + "".join(head) + "</tr>"]
    cells = [
        f'<td>runs (measured / total)</td><td></td><td class="num">'
        f"{len(base.measured_ids)} / {len(base.run_ids)}</td>"
    ]
    for side in comparison.candidates:
        cells.append(
            f'<td class="num">{len(side.measured_ids)} / {len(side.run_ids)}</td><td></td><td></td>'
        )
    rows.append("<tr>" + "".join(cells) + "</tr>")
    for metric in comparison.metrics:
        arrow = "↑ higher" if metric.better == "higher" else "↓ lower"
        cells = [
            f'<td title="{_e(metric.formula)}">{_e(metric.label)} ({_e(metric.unit)})</td>'
            f'<td class="muted">{arrow}</td>'
            f'<td class="num">{fmt_value(base.stats(metric.key)["mean"], metric.unit)}</td>'
        ]
        for side in comparison.candidates:
            c = comparison.changes.get((side.label, metric.key))
            css = _css_class(metric, c)
            delta = "—" if c is None or c.rel_change is None else f"{c.rel_change * 100:+.1f} %"
            verdict = "" if c is None else VERDICT_LABEL[c.verdict]
            if c is not None and c.rel_low is not None and c.rel_high is not None:
                verdict += f" ({pct} CI {c.rel_low * 100:+.1f} … {c.rel_high * 100:+.1f} %)"
            elif c is not None and c.note:
                verdict += f" ({_e(c.note)})"
            vcss = css if c is not None and c.verdict in ("better", "worse") else "muted"
            mean = fmt_value(side.stats(metric.key)["mean"], metric.unit)
            cells.append(
                f'<td class="num">{mean}</td><td class="num {css}">{delta}</td>'
                f'<td class="{vcss}">{verdict}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return (
        '<section id="table"><h2>Side by side</h2><p class="muted">Values are the mean over '
        "each side's runs; Δ is the candidate's change of the mean vs the baseline (green = "
        "the better direction, red = worse; bold when the verdict is clear).</p>"
        f'<table id="metrics">{"".join(rows)}</table></section>'
    )


def _charts_section(db: Any, comparison: Comparison, kinds: Sequence[str]) -> tuple[str, int]:
    parts = ['<section id="charts"><h2>Charts</h2>']
    count = 0
    for kind in kinds:
        try:
            chart = ch.build_chart(db, comparison, kind)
            if chart is None:
                continue
            svg = chart_svg(chart).decode("utf-8")
        except Exception as exc:  # one chart that cannot be drawn must not lose the report
            parts.append(
                f'<p class="muted">{_e(ch.CHART_TITLES.get(kind, kind))}: not drawn '
                f"({_e(type(exc).__name__)}: {_e(str(exc)[:200])})</p>"
            )
            continue
        count += 1
        note = (
            f'<p class="muted">{_e(ch.PREALLOCATION_NOTE)}</p>' if kind in ("memory", "kv") else ""
        )
        parts.append(
            f'<figure class="chart" data-kind="{_e(kind)}"><figcaption>'
            f"{_e(ch.CHART_TITLES.get(kind, kind))}</figcaption>{note}"
            f"{inline_svg(svg, f'c{count}')}</figure>"
        )
    if not count:
        parts.append("<p>No chart: these runs have no measurements.</p>")
    parts.append("</section>")
    return "".join(parts), count


def _runs_section(
    comparison: Comparison,
    runs: Sequence[Mapping[str, Any]],
    extra: Mapping[int, Mapping[str, Any]],
    secrets: Sequence[str],
) -> str:
    side_of = {rid: s.label for s in comparison.sides for rid in s.run_ids}
    rows = []
    failures = []
    for run in runs:
        rid = int(run["id"])
        more = extra.get(rid, {})
        who = f"{run.get('author') or '?'}@{run.get('host') or '?'}"
        origin = more.get("origin") or "local"
        rows.append(
            f"<tr><td>{rid}</td><td><code>{_e(str(run.get('uid') or '')[:12])}</code></td>"
            f"<td>{_e(side_of.get(rid, 'left out'))}</td><td>{_e(run.get('value'))}</td>"
            f"<td>{_e(run.get('repeat_index'))}</td><td>{_e(run.get('status'))}</td>"
            f"<td>{_e(who)}</td><td>{_e(scrub_text(str(origin), secrets))}</td>"
            f"<td>{_e(more.get('hardware'))}</td><td>{_e(more.get('engine'))} "
            f"{_e(more.get('vllm_version'))}</td><td>{_e(more.get('started_at'))}</td>"
            f"<td>{_e(run.get('failure_kind'))}</td></tr>"
        )
        if run.get("status") not in ("done",) and (
            more.get("failure_reason") or more.get("log_tail")
        ):
            tail = scrub_text(str(more.get("log_tail") or ""), secrets)[-LOG_TAIL_CHARS:]
            failures.append(
                f"<h3>Run {rid}: {_e(run.get('failure_kind') or run.get('status'))}</h3>"
                f"<p>{_e(scrub_text(str(more.get('failure_reason') or ''), secrets))}</p>"
                + (
                    f"<p><i>Hint:</i> {_e(scrub_text(str(more.get('failure_hint')), secrets))}</p>"
                    if more.get("failure_hint")
                    else ""
                )
                + (
                    f"<details><summary>log excerpt</summary><pre>{_e(tail)}</pre></details>"
                    if tail
                    else ""
                )
            )
    out = (
        '<section id="runs"><h2>Runs</h2><table id="run-list"><tr><th>run</th><th>uid</th>'
        "<th>side</th><th>value</th><th>repeat</th><th>status</th><th>author@host</th>"
        "<th>origin</th><th>hardware</th><th>engine</th><th>started</th><th>failure</th></tr>"
        + "".join(rows)
        + "</table></section>"
    )
    if failures:
        out += '<section id="failures"><h2>Failed runs</h2>' + "".join(failures) + "</section>"
    return out


def _experiment_section(exp: Mapping[str, Any] | None, secrets: Sequence[str]) -> str:
    if not exp:
        return ""
    items = [
        ("name", exp.get("name")),
        ("parameter", exp.get("param")),
        ("values", exp.get("values_json")),
        ("repeats", exp.get("repeats")),
        ("model", exp.get("model")),
        ("status", exp.get("status")),
        ("author@host", f"{exp.get('author') or '?'}@{exp.get('host') or '?'}"),
        ("origin", exp.get("origin") or "local"),
        ("created", exp.get("created_at")),
        ("finished", exp.get("finished_at")),
        ("notes", exp.get("notes")),
        ("tags", exp.get("tags")),
    ]
    rows = "".join(
        f"<tr><th>{_e(k)}</th><td>{_e(scrub_text(str(v), secrets) if v else v)}</td></tr>"
        for k, v in items
    )
    return f'<section id="experiment"><h2>Experiment</h2><table>{rows}</table></section>'


def _definitions_section() -> str:
    items = "".join(
        f"<li><b>{_e(m.label)}</b> ({_e(m.unit)}, {_e(m.better)} is better): {_e(m.formula)}</li>"
        for m in METRICS
    )
    return (
        f'<section id="definitions"><h2>How each number is computed</h2><ul>{items}</ul></section>'
    )


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def _connect(db: Any) -> tuple[Any, bool]:
    if isinstance(db, (str, Path)):
        path = Path(db)
        if not path.exists():
            raise ReportError(f"no lab database at {path}")
        return open_db(path, readonly=True), True
    return db, False


def build_report(
    db: Any,
    *,
    run_ids: Iterable[int] = (),
    experiment_id: int | None = None,
    baseline_ids: Sequence[int] | None = None,
    slo_ms: Mapping[str, float] | None = None,
    title: str | None = None,
    kinds: Sequence[str] = ch.CHART_KINDS,
) -> str:
    """The report as one HTML string; `db` is a path (opened read-only) or an open Database."""
    from tuning.compare.comparison import request_loader

    conn, owned = _connect(db)
    try:
        ids = list(dict.fromkeys(int(i) for i in run_ids))
        exp = None
        if experiment_id is not None:
            try:
                exp = queries.get_experiment(conn, int(experiment_id))
            except StoreError:
                raise ReportError(f"no experiment {experiment_id}") from None
            ids += [i for i in queries.experiment_run_ids(conn, int(experiment_id)) if i not in ids]
        if not ids:
            raise ReportError("nothing to report: name runs or an experiment with runs")
        try:
            runs = queries.load_runs(conn, ids)
        except StoreError as exc:
            raise ReportError(str(exc)) from None
        base = [int(i) for i in (baseline_ids or []) if int(i) in ids] or default_baseline(runs)
        comparison = build_comparison(runs, base, slo_ms=slo_ms, requests=request_loader(conn))
        extra = queries.runs_by_id(conn, ids, _EXTRA_COLUMNS)
        by_id = {int(r["id"]): r for r in runs}
        secrets = env_secrets()
        charts_html, n_charts = _charts_section(conn, comparison, kinds)
        heading = title or (
            f"Experiment {int(exp['id'])}: {exp.get('name') or ''}"
            if exp
            else f"Comparison of {len(ids)} runs"
        )
        heading = scrub_text(heading, secrets)
        authors = sorted({f"{r.get('author') or '?'}@{r.get('host') or '?'}" for r in runs})
        now = datetime.now(UTC).isoformat(timespec="seconds")
        body = "".join(
            [
                f'<header><h1>{_e(heading)}</h1><p class="meta">vLLM Tuning Lab report · '
                f"generated {_e(now)} · {len(ids)} run(s) by {_e(', '.join(authors))} · "
                f"{n_charts} chart(s) · self-contained, opens offline</p></header>",
                _experiment_section(exp, secrets),
                _checks_section(comparison),
                _verdicts_section(comparison),
                _config_section(comparison, by_id),
                _table_section(comparison),
                charts_html,
                _runs_section(comparison, runs, extra, secrets),
                _definitions_section(),
            ]
        )
    finally:
        if owned:
            conn.conn.close()
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(heading)}</title><style>{STYLE}</style></head><body>{body}"
        "</body></html>\n"
    )
    refs = network_references(page)
    if refs:  # never hand out a page that would try to fetch something
        raise ReportError(f"report would reference the network: {refs[:3]}")
    return page


def write_report(db: Any, out_path: str | Path, **kwargs: Any) -> Path:
    """Build the report and write it (atomically) to `out_path`."""
    out = Path(out_path)
    page = build_report(db, **kwargs)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
