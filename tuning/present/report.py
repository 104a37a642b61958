"""One standalone HTML report of an experiment or a comparison, to mail, attach or archive.

It holds what the Compare page shows: comparability, configuration diff, the side-by-side table
with verdicts, every chart, and the runs with who ran them where. Charts are inline SVG rendered
by vl-convert in-process (no JavaScript at all), and a Content-Security-Policy of
``default-src 'none'`` tells the browser to fetch nothing, so the file opens on a closed network
and a teammate's text inside it cannot run. Every string from the DB is HTML-escaped and
secret-scrubbed (run rows may come from imported bundles).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.redact import env_secrets, scrub_text
from core.status import Status
from store import StoreError, connect, queries
from tuning.compare.catalog import METRICS
from tuning.compare.comparability import run_parameters, run_workload
from tuning.compare.comparison import Comparison
from tuning.compare.present import tone_css
from tuning.compare.selection import SelectionError
from tuning.decide.search.names import shown_names
from tuning.engine.params import run_value, show_value
from tuning.experiment.time_spent import report as time_spent_report
from tuning.present.charts.build import build_chart
from tuning.present.charts.kinds import CHART_KINDS, CHART_TITLES, PREALLOCATION_NOTE
from tuning.present.export import chart_svg, network_references
from tuning.present.model import ReportModel, build_model
from tuning.present.report_cards import CARDS_STYLE, cards_section, chart_lines
from tuning.present.report_verdicts import (
    HEADLINE_STYLE,
    checks_section,
    escaped,
    headline_section,
    prefer_section,
    table_section,
    verdicts_section,
)

_e = escaped  # every text from the DB, escaped for HTML

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
.ok{background:#dafbe1;padding:.5rem;border-radius:6px}
.warn{background:#fff8c5;padding:.5rem;border-radius:6px}
tr.changed td{background:#fff8c5}
figure.chart{margin:1rem 0;padding:.5rem;border:1px solid #d0d7de;border-radius:6px;
overflow-x:auto}figure.chart svg{max-width:100%;height:auto}
figcaption{font-weight:600;margin-bottom:.3rem}pre{background:#f6f8fa;padding:.5rem;
overflow-x:auto;font-size:.8rem;white-space:pre-wrap}code{font-size:.9em}
""" + tone_css()  # .better / .worse / .muted: the tones every view shares
STYLE += HEADLINE_STYLE + CARDS_STYLE  # the decision at the top, set apart; the cards


class ReportError(ValueError):
    """Nothing to report: no runs named, or a run or experiment that does not exist."""


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


def _config_section(comparison: Comparison, by_id: Mapping[int, Mapping[str, Any]]) -> str:
    sides = comparison.sides
    refs = [by_id.get(s.run_ids[0]) if s.run_ids else None for s in sides]
    cfgs = [run_parameters(r) if r else {} for r in refs]
    keys = sorted(set().union(*[set(c) for c in cfgs])) if cfgs else []

    def norm(v: Any) -> str:
        return "unset" if v is None else str(v)

    def kv_rows(items: Iterable[tuple[str, Any]]) -> str:
        return "".join(
            f"<tr><td><code>{_e(k)}</code></td><td>{_e(show_value(k, v))}</td></tr>"
            for k, v in items
        )

    changed = [k for k in keys if len({norm(c.get(k)) for c in cfgs}) > 1]
    head = "".join(f"<th>{_e(s.label)}</th>" for s in sides)
    rows = [
        f'<tr class="changed"><td><code>{_e(key)}</code></td>'
        + "".join(f"<td>{_e(show_value(key, c.get(key)))}</td>" for c in cfgs)
        + "</tr>"
        for key in changed
    ]
    if rows:
        diff = (
            f"<p>Parameters that differ between the sides (everything else is the same):</p>"
            f'<table id="config-diff"><tr><th>parameter</th>{head}</tr>{"".join(rows)}'
            "</table>"
        )
    else:
        diff = '<p id="config-diff">One configuration only: no parameter differs.</p>'
    ref = refs[0] if refs else None
    base = sorted((cfgs[0] if cfgs else {}).items())
    workload = sorted((run_workload(ref) if ref else {}).items())
    fingerprint = ref.get("workload_fingerprint") if ref else None
    return (
        f'<section id="configuration"><h2>Configuration</h2>{diff}'
        f"<details><summary>Baseline configuration and workload (fingerprint "
        f"<code>{_e(fingerprint)}</code>)</summary><table><tr><th>parameter</th>"
        f"<th>value</th></tr>{kv_rows(base)}</table><table><tr><th>workload</th>"
        f"<th>value</th></tr>{kv_rows(workload)}</table></details></section>"
    )


def _charts_section(
    db: Any, comparison: Comparison, kinds: Sequence[str], context: list[str]
) -> tuple[str, int]:
    parts = ['<section id="charts"><h2>Charts</h2>']
    count = 0
    for kind in kinds:
        title = _e(CHART_TITLES.get(kind, kind))
        try:
            chart = build_chart(db, comparison, kind, context=context)  # as exports carry it
            if chart is None:
                continue
            svg = chart_svg(chart).decode("utf-8")
        except Exception as exc:  # one chart that cannot be drawn must not lose the report
            parts.append(
                f'<p class="muted">{title}: not drawn '
                f"({_e(type(exc).__name__)}: {_e(str(exc)[:200])})</p>"
            )
            continue
        count += 1
        note = f'<p class="muted">{_e(PREALLOCATION_NOTE)}</p>' if kind in ("memory", "kv") else ""
        parts.append(
            f'<figure class="chart" data-kind="{_e(kind)}"><figcaption>{title}</figcaption>'
            f"{note}{inline_svg(svg, f'c{count}')}</figure>"
        )
    if not count:
        parts.append("<p>No chart: these runs have no measurements.</p>")
    parts.append("</section>")
    return "".join(parts), count


def _failure(run: Mapping[str, Any], more: Mapping[str, Any], secrets: Sequence[str]) -> str:
    """A failed run's reason, hint and log excerpt, scrubbed."""

    def clean(key: str) -> str:
        return scrub_text(str(more.get(key) or ""), secrets)

    tail = clean("log_tail")[-LOG_TAIL_CHARS:]
    hint = clean("failure_hint")
    return (
        f"<h3>Run {int(run['id'])}: {_e(run.get('failure_kind') or run.get('status'))}</h3>"
        f"<p>{_e(clean('failure_reason'))}</p>"
        + (f"<p><i>Hint:</i> {_e(hint)}</p>" if hint else "")
        + (
            f"<details><summary>log excerpt</summary><pre>{_e(tail)}</pre></details>"
            if tail
            else ""
        )
    )


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
            f"<td>{_e(side_of.get(rid, 'left out'))}</td><td>{_e(run_value(run))}</td>"
            f"<td>{_e(run.get('repeat_index'))}</td><td>{_e(run.get('status'))}</td>"
            f"<td>{_e(who)}</td><td>{_e(scrub_text(str(origin), secrets))}</td>"
            f"<td>{_e(more.get('hardware'))}</td><td>{_e(more.get('engine'))} "
            f"{_e(more.get('vllm_version'))}</td><td>{_e(more.get('started_at'))}</td>"
            f"<td>{_e(run.get('failure_kind'))}</td></tr>"
        )
        if run.get("status") != Status.DONE and (
            more.get("failure_reason") or more.get("log_tail")
        ):
            failures.append(_failure(run, more, secrets))
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


def _values_text(exp: Mapping[str, Any]) -> Any:
    """'1 GiB, 16 GiB': the experiment's values as a person reads them (the stored JSON else)."""
    values = exp.get("values")
    if not isinstance(values, list):
        return exp.get("values_json")
    return ", ".join(show_value(exp.get("param"), v) for v in values)


def _experiment_section(exp: Mapping[str, Any], secrets: Sequence[str]) -> str:
    items = [
        ("name", exp.get("name")),
        ("parameter", exp.get("param")),
        ("values", _values_text(exp)),
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


def _time_spent_section(db: Any, runs: Sequence[Mapping[str, Any]], secrets: Sequence[str]) -> str:
    """Each experiment's time, its estimate, cold starts and resident engines, as `compare` and
    the Compare page say them (tuning.experiment.time_spent.report); nothing without them."""
    entries = time_spent_report(db, runs)
    if not entries:
        return ""
    items = "".join(
        "<li>" + "<br>".join(_e(scrub_text(line, secrets)) for line in e["lines"]) + "</li>"
        for e in entries
    )
    return f'<section id="time-spent"><h2>Where the time went</h2><ul>{items}</ul></section>'


def _definitions_section() -> str:
    items = "".join(f"<li>{_e(m.definition)}</li>" for m in METRICS)
    return (
        f'<section id="definitions"><h2>How each number is computed</h2><ul>{items}</ul></section>'
    )


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def _heading(title: str | None, experiments: Sequence[Mapping[str, Any]], n_runs: int) -> str:
    if title:
        return title
    if len(experiments) == 1:
        exp = experiments[0]
        return f"Experiment {int(exp['id'])}: {exp.get('name') or ''}"
    return f"Comparison of {n_runs} runs"


def _body(
    db: Any, heading: str, model: ReportModel, kinds: Sequence[str], secrets: Sequence[str]
) -> str:
    runs, comparison = model.runs, model.comparison
    ids = [int(r["id"]) for r in runs]
    extra = queries.runs_by_id(db, ids, _EXTRA_COLUMNS)
    charts_html, n_charts = _charts_section(db, comparison, kinds, chart_lines(runs, comparison))
    authors = sorted({f"{r.get('author') or '?'}@{r.get('host') or '?'}" for r in runs})
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return "".join(
        [
            f'<header><h1>{_e(heading)}</h1><p class="meta">vLLM Tuning Lab report · '
            f"generated {_e(now)} · {len(ids)} run(s) by {_e(', '.join(authors))} · "
            f"{n_charts} chart(s) · self-contained, opens offline</p>",
            cards_section(runs, model.experiments, secrets) + "</header>",  # what it is of
            headline_section(model.headline),
            *(_experiment_section(exp, secrets) for exp in model.experiments),
            checks_section(comparison),
            verdicts_section(comparison, model.headline),
            prefer_section(model.preference, model.command),
            _config_section(comparison, {int(r["id"]): r for r in runs}),
            table_section(comparison),
            charts_html,
            _runs_section(comparison, runs, extra, secrets),
            _time_spent_section(db, runs, secrets),
            _definitions_section(),
        ]
    )


def build_report(
    db_path: str | Path,
    *,
    run_ids: Iterable[int] = (),
    experiment_ids: Iterable[int] = (),
    baseline_ids: Sequence[int] = (),
    slo_ms: Mapping[str, float] | None = None,
    title: str | None = None,
    kinds: Sequence[str] = CHART_KINDS,
) -> str:
    """The report of the runs named (and every run of the experiments named) as one HTML page."""
    secrets = env_secrets()
    try:
        with connect(db_path, readonly=True) as db:
            model = build_model(
                db,
                run_ids=run_ids,
                experiment_ids=experiment_ids,
                baseline_ids=baseline_ids,
                slo=slo_ms,
            )
            shown = shown_names(db, model.experiments)  # a search's step by its search's id
            named = [{**e, "name": shown[int(e["id"])]} for e in model.experiments]
            model = replace(model, experiments=named)  # the names as read; the rows as stored
            heading = scrub_text(_heading(title, model.experiments, len(model.runs)), secrets)
            body = _body(db, heading, model, kinds, secrets)
    except (StoreError, SelectionError) as exc:
        raise ReportError(str(exc)) from None
    return html_page(heading, body)


def html_page(heading: str, body: str) -> str:
    """A whole offline page around `body` (already escaped): the CSP that fetches nothing, the
    report's style; refused when it would still reference the network."""
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


def write_report(db_path: str | Path, out_path: str | Path, **kwargs: Any) -> Path:
    """Build the report and write it (atomically) to `out_path`."""
    return write_page(build_report(db_path, **kwargs), out_path)


def write_page(page: str, out_path: str | Path) -> Path:
    """Write a page atomically (a partial file never stands under the final name)."""
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.partial")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)
    return out
