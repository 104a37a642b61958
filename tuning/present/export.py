"""Charts and comparison tables out of the lab: PNG, SVG, standalone HTML, CSV, JSON.

All offline: PNG and SVG are rendered by vl-convert in-process, and the HTML inlines the
vega/vega-lite/vega-embed bundle, so a file opened on a closed-network GPU box draws without
fetching anything. CSV cells that a spreadsheet would run as a formula are defused, and file
names are built from ids and fixed kinds only, never from text a user typed.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import altair as alt
from altair.utils.html import spec_to_html

from tuning.compare.chunks import chunk_note, tokens_per_chunk
from tuning.compare.comparison import Comparison

# What may not appear raw in JSON inside <script>: each becomes its \u escape.
_SCRIPT_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_SAFE_KIND = re.compile(r"[^a-z0-9_-]+")
_NETWORK = re.compile(
    r"""<script[^>]+src\s*=\s*["']?\s*(?:https?:)?//"""  # remote scripts
    r"""|<link[^>]+href\s*=\s*["']?\s*(?:https?:)?//"""  # remote stylesheets, fonts
    r"""|@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//"""  # CSS imports
    r"""|<(?:img|iframe)[^>]+src\s*=\s*["']?\s*(?:https?:)?//""",
    re.IGNORECASE,
)


def chart_png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    """PNG via vl-convert (about a second the first time in a process, for its JS engine)."""
    buf = io.BytesIO()
    chart.save(buf, format="png", scale_factor=scale)
    return buf.getvalue()


def chart_svg(chart: alt.TopLevelMixin) -> bytes:
    buf = io.StringIO()
    chart.save(buf, format="svg")
    return buf.getvalue().encode("utf-8")


def script_json(value: Any) -> str:
    """JSON to put inside an HTML <script> element: `<`, `>`, `&`, U+2028 and U+2029 as \\u
    escapes, so no value can close the element (`</script>`), open a comment that swallows
    the page's end (`<!--<script>`), or end a JavaScript line. Still JSON, and the same value.
    Every HTML export embeds its data through this (one place)."""
    return json.dumps(value, cls=_ScriptJSONEncoder)


class _ScriptJSONEncoder(json.JSONEncoder):
    """`json.dumps(..., cls=_ScriptJSONEncoder)`: what `script_json` writes (for code, such as
    Altair's page template, that takes `json_kwds`)."""

    def encode(self, o: Any) -> str:
        return super().encode(o).translate(_SCRIPT_ESCAPES)

    def iterencode(self, o: Any, _one_shot: bool = False) -> Iterator[str]:
        for chunk in super().iterencode(o, _one_shot):
            yield chunk.translate(_SCRIPT_ESCAPES)


def chart_html(chart: alt.TopLevelMixin) -> bytes:
    """A standalone page with the JS bundle inlined (the "inline" template): opens with no
    network. The spec (run values, labels, titles: text from data, maybe an imported bundle) is
    embedded as `script_json`, and the page is refused unless it embeds exactly that."""
    spec = chart.to_dict()
    html = spec_to_html(
        spec,
        mode="vega-lite",
        vega_version=alt.VEGA_VERSION,
        vegaembed_version=alt.VEGAEMBED_VERSION,
        vegalite_version=alt.VEGALITE_VERSION,
        embed_options={"actions": False},
        json_kwds={"cls": _ScriptJSONEncoder},
        template="inline",
    )
    if script_json(spec) not in html:
        raise RuntimeError("exported HTML does not embed the chart's spec escaped")
    refs = network_references(html)
    if refs:  # never hand out a page that would try to fetch something
        raise RuntimeError(f"exported HTML references the network: {refs[:3]}")
    return html.encode("utf-8")


def network_references(html: str) -> list[str]:
    """Tags or imports in an HTML page that would load something from the network."""
    return [m.group(0) for m in _NETWORK.finditer(html)]


def escape_cell(value: Any) -> Any:
    """Defuse spreadsheet formulas: a text cell starting with = + - @ tab or CR gets a leading
    single quote (OWASP's CSV-injection advice). Numbers stay numbers, so -3.2 stays -3.2."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return ""
    if isinstance(value, (list, tuple, dict)):
        value = json.dumps(value, default=str)
    return escape_cell(value)


def rows_csv(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> bytes:
    """CSV (UTF-8, header first) with every text cell escaped against formula injection."""
    cols = list(columns or (list(rows[0].keys()) if rows else []))
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([escape_cell(c) for c in cols])
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in cols])
    return buf.getvalue().encode("utf-8")


def comparison_csv(comparison: Comparison) -> bytes:
    return rows_csv(comparison.rows())


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def comparison_json(comparison: Comparison, extra: Mapping[str, Any] | None = None) -> bytes:
    """The comparison as JSON (strict: NaN and infinities become null), with `extra` keys (the
    recommendation) at the top, and each side's tokens a chunk with the note that says when they
    differ (ITL, per chunk, then does not compare)."""
    chunks = {
        "tokens_per_chunk": {s.label: tokens_per_chunk(s) for s in comparison.sides},
        "note": chunk_note(comparison),
    }
    data = _clean({**comparison.to_json(), "chunks": chunks, **(extra or {})})
    return json.dumps(data, indent=2, allow_nan=False, default=str).encode("utf-8")


def export_name(scope: str | int | None, kind: str, ext: str) -> str:
    """'compare-exp12-throughput.png': from an id and a fixed kind only, never from user text."""
    if isinstance(scope, bool):
        scope = None
    if isinstance(scope, int) or isinstance(scope, str) and scope.isdigit():
        prefix = f"compare-exp{int(scope)}"
    else:
        prefix = "compare-runs"
    clean_kind = _SAFE_KIND.sub("-", str(kind).lower()).strip("-")[:40] or "chart"
    clean_ext = _SAFE_KIND.sub("", str(ext).lower().lstrip("."))[:8] or "bin"
    return f"{prefix}-{clean_kind}.{clean_ext}"


MIME = {
    "png": "image/png",
    "svg": "image/svg+xml",
    "html": "text/html",
    "csv": "text/csv",
    "json": "application/json",
}


def chart_bytes(chart: alt.TopLevelMixin, fmt: str) -> bytes:
    """One of png, svg, html."""
    if fmt == "png":
        return chart_png(chart)
    if fmt == "svg":
        return chart_svg(chart)
    if fmt == "html":
        return chart_html(chart)
    raise ValueError(f"unknown chart format {fmt!r}; use png, svg or html")


def chart_format(path: str) -> str:
    """The format a chart file's name asks for (png, svg, html); ValueError for anything else."""
    ext = path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if ext not in ("png", "svg", "html"):
        raise ValueError(f"--out must end in .png, .svg or .html, got {path!r}")
    return ext


def write_chart(chart: alt.TopLevelMixin, path: str) -> str:
    """Save by the path's extension (CLI use); returns the format written."""
    ext = chart_format(path)
    data = chart_bytes(chart, ext)
    with open(path, "wb") as fh:
        fh.write(data)
    return ext
