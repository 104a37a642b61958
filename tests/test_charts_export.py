"""Charts and exports: PNG/SVG/HTML render offline, HTML references nothing on the network, CSV
cells cannot become formulas, file names never come from user text; and the CLI's compare/chart."""

from __future__ import annotations

import io
import json
import struct
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from core.records import RequestRecord, SampleRow
from store import open_db, queries, repo
from tuning.charts import build as ch
from tuning.charts import common, kinds
from tuning.charts import compare as charts_compare
from tuning.charts import timeseries as ts
from tuning.cli.main import main as cli_main
from tuning.compare.comparison import build_comparison, default_baseline, request_columns
from tuning.metrics import summarize
from tuning.output import export

WORKLOAD = {
    "num_requests": 30,
    "concurrency": 4,
    "input_len": 16,
    "output_len": 8,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}


def _seed(path: Path) -> int:
    """Two values x 3 repeats, with request rows and samples; value 8 is 10 % slower to TTFT."""
    db = open_db(path)
    rng = np.random.default_rng(1)
    exp = repo.create_experiment(
        db,
        name="block-size",
        param="block-size",
        values_json=[16, 8],
        repeats=3,
        status="done",
        runs_total=6,
        runs_done=6,
    )
    seq = 0
    for rep in range(3):
        for value, ttft in ((16, 0.100), (8, 0.110)):
            rid = repo.create_run(
                db,
                experiment_id=exp,
                seq=seq,
                repeat_index=rep,
                param="block-size",
                value=str(value),
                config_json={"block-size": value},
                workload_json=WORKLOAD,
                workload_fingerprint="fp",
                engine="embedded",
                vllm_version="0.32.0",
                model="tiny",
                hardware="cpu",
                status="done",
            )
            seq += 1
            recs = []
            for i in range(30):
                t = ttft * (1 + rng.normal(0, 0.01))
                itl = [0.01] * 7
                recs.append(
                    RequestRecord(
                        index=i,
                        start=i * 0.1,
                        ttft=t,
                        end=i * 0.1 + t + 0.07,
                        itl=itl,
                        prompt_tokens=16,
                        output_tokens=8,
                        ok=True,
                    )
                )
            repo.insert_requests(db, rid, recs)
            repo.insert_samples(
                db,
                rid,
                [
                    SampleRow(k * 0.1, name, v)
                    for k in range(3000)
                    for name, v in (
                        ("tree_rss_bytes", 2**30 + k),
                        ("kv_cache_usage_perc", k / 3000),
                        ("generation_tokens_total", k * 5.0),
                    )
                ],
            )
            summary = summarize(recs, 3.0)
            summary.update(peak_tree_rss_bytes=2**30, load_window_s=[10.0, 200.0])
            repo.store_summary(db, rid, summary)
            repo.update_run(db, rid, kv_cache_tokens=4096 * value // 16)
    db.conn.close()
    return exp


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Built once for the module (about 3 s); tests must not change it."""
    path = tmp_path_factory.mktemp("charts") / "lab.db"
    exp = _seed(path)
    db = open_db(path)
    runs = queries.load_runs(db, queries.experiment_run_ids(db, exp))
    cmp = build_comparison(runs, default_baseline(runs))
    return {"path": path, "db": db, "exp": exp, "cmp": cmp, "runs": runs}


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert zlib.crc32(data[12:29]) == struct.unpack(">I", data[29:33])[0]
    return width, height


def test_png_svg_html_exports(lab: dict[str, Any]) -> None:
    chart = charts_compare.throughput_chart(lab["cmp"])
    png = export.chart_png(chart)
    width, height = _png_size(png)
    assert width > 100 and height > 100
    try:
        from PIL import Image
    except ImportError:
        pass
    else:
        img = Image.open(io.BytesIO(png))
        img.load()
        assert img.size == (width, height)
    svg = export.chart_svg(chart)
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    html = export.chart_html(chart).decode("utf-8")
    assert export.network_references(html) == []
    lowered = html.lower()
    assert "<script src" not in lowered and '<script type="text/javascript" src' not in lowered
    assert "<link" not in lowered and "@import" not in lowered
    assert "vegaEmbed(" in html and "output_throughput" not in html.split("vegaEmbed(")[0][:200]


def test_network_reference_detector() -> None:
    assert export.network_references('<script src="https://cdn.jsdelivr.net/npm/vega">')
    assert export.network_references("<link rel=stylesheet href='//fonts.example/x.css'>")
    assert export.network_references("<style>@import url(https://x/y.css)</style>")
    assert not export.network_references(
        '<script type="text/javascript">var a = "http://x";</script>'
    )


def test_every_chart_kind_builds_small(lab: dict[str, Any]) -> None:
    for kind in kinds.CHART_KINDS:
        chart = ch.build_chart(lab["db"], lab["cmp"], kind)
        assert chart is not None, kind
        spec = chart.to_dict()
        blob = json.dumps(spec)
        rows = sum(len(v) for v in spec.get("datasets", {}).values())
        assert rows <= common.MAX_POINTS + 200, (kind, rows)
        assert len(blob) < 600_000, kind
    svg = export.chart_svg(ch.build_chart(lab["db"], lab["cmp"], "memory"))
    assert b"pre-allocates" in svg


def test_live_chart_and_rates(lab: dict[str, Any]) -> None:
    assert ts.counter_rate([(0, 0), (1, 10), (2, 30), (3, 5)]) == [(1, 10.0), (2, 20.0), (3, 0.0)]
    assert len(common.downsample([(float(i), float(i % 7)) for i in range(10_000)], 500)) <= 500
    assert (
        max(
            v
            for _, v in common.downsample(
                [(float(i), 0.0 if i != 4321 else 9.0) for i in range(10_000)], 100
            )
        )
        == 9.0
    )
    rid = lab["runs"][0]["id"]
    series = {
        name: queries.load_series(lab["db"], rid, name, 300)
        for name in (
            "tree_rss_bytes",
            "kv_cache_usage_perc",
            "generation_tokens_total",
            "num_requests_running",
        )
    }
    assert len(series["tree_rss_bytes"]) <= 301
    chart = ts.live_chart(series, "tree_rss_bytes")
    spec = chart.to_dict()
    assert len(spec["vconcat"]) == 3  # no running/waiting samples: that panel is left out
    png = export.chart_png(chart)
    _png_size(png)
    rates = ts.tokens_rate_from_requests(request_columns(lab["db"], rid, with_itl=True), 10.0)
    assert rates and sum(v for _, v in rates) == pytest.approx(30 * 8, rel=1e-6)


def test_csv_cells_are_defused() -> None:
    rows = [
        {
            "side": '=HYPERLINK("http://x")',
            "a": "+1",
            "b": "-2",
            "c": "@SUM(A1)",
            "d": "\tx",
            "e": "\rx",
            "f": -3.5,
            "g": "plain",
            "h": None,
        }
    ]
    text = export.rows_csv(rows).decode("utf-8")
    lines = text.splitlines()
    assert lines[0] == "side,a,b,c,d,e,f,g,h"
    body = text.split("\n", 1)[1]
    for cell in ("'=HYPERLINK", "'+1", "'-2", "'@SUM(A1)", "'\tx", "-3.5", "plain"):
        assert cell in body, cell
    assert "'\rx" in body
    assert export.escape_cell(-2) == -2 and export.escape_cell("-2") == "'-2"
    header = export.rows_csv([{"=evil": 1}]).decode().splitlines()[0]
    assert header == "'=evil"


def test_comparison_csv_and_json(lab: dict[str, Any]) -> None:
    cmp = build_comparison(lab["runs"], default_baseline(lab["runs"]))
    cmp.baseline.label = "=danger"  # a label that came from user text
    text = export.comparison_csv(cmp).decode()
    assert "'=danger" in text and "\n=danger" not in text
    data = json.loads(export.comparison_json(cmp))
    assert data["verdict_rule"]["unit"] == "run"
    verdicts = {(r["side"], r["metric"]): r["verdict"] for r in data["rows"]}
    assert verdicts[("block-size = 8", "mean_ttft_ms")] == "worse"


def test_file_names_are_generated() -> None:
    assert export.export_name(12, "throughput", "png") == "compare-exp12-throughput.png"
    assert export.export_name(None, "table", "csv") == "compare-runs-table.csv"
    evil = export.export_name("../../etc/passwd", "../x y;rm -rf", ".p/n\\g")
    assert "/" not in evil and "\\" not in evil and ".." not in evil and " " not in evil
    assert evil.startswith("compare-runs-")
    assert export.export_name(True, "", "") == "compare-runs-chart.bin"


def test_cli_compare_text_and_json(lab: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    ids = [str(r["id"]) for r in lab["runs"]]
    assert cli_main(["compare", "--db", str(lab["path"]), *ids]) == 0
    out = capsys.readouterr().out
    assert "Baseline: block-size = 16" in out and "worse" in out and "mean TTFT" in out
    assert (
        cli_main(
            [
                "compare",
                "--db",
                str(lab["path"]),
                "--json",
                "--slo",
                "ttft:105",
                "--experiment",
                str(lab["exp"]),
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["slo_ms"] == {"ttft": 105.0}
    assert any(r["metric"] == "request_goodput" for r in data["rows"])
    # the baseline flag flips the roles
    eight = [r["id"] for r in lab["runs"] if r["value"] == "8"][0]
    assert (
        cli_main(["compare", "--db", str(lab["path"]), "--baseline", str(eight), "--json", *ids])
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    rows = {(r["side"], r["metric"]): r for r in data["rows"]}
    assert rows[("block-size = 16", "mean_ttft_ms")]["verdict"] == "better"
    # run ids right after --slo values still count as runs
    assert (
        cli_main(
            ["compare", "--db", str(lab["path"]), "--json", "--slo", "ttft:105", "tpot:50", *ids]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["slo_ms"] == {"ttft": 105.0, "tpot": 50.0} and len(data["candidates"]) == 1
    assert cli_main(["compare", "--db", str(lab["path"]), "999"]) == 2
    assert cli_main(["compare", "--db", str(lab["path"]), "--slo", "itl:4", *ids]) == 2


def test_cli_chart(lab: dict[str, Any], tmp_path: Path) -> None:
    ids = [str(r["id"]) for r in lab["runs"]]
    out = tmp_path / "kv.svg"
    assert (
        cli_main(["chart", "--db", str(lab["path"]), "--kind", "kv", "--out", str(out), *ids]) == 0
    )
    ET.fromstring(out.read_bytes())
    html = tmp_path / "lat.html"
    assert (
        cli_main(
            [
                "chart",
                "--db",
                str(lab["path"]),
                "--kind",
                "latency",
                "--out",
                str(html),
                "--experiment",
                str(lab["exp"]),
            ]
        )
        == 0
    )
    assert not export.network_references(html.read_text())
    assert (
        cli_main(
            [
                "chart",
                "--db",
                str(lab["path"]),
                "--kind",
                "cdf",
                "--out",
                str(tmp_path / "x.pdf"),
                *ids,
            ]
        )
        == 2
    )


def test_cli_starts_without_altair_and_knows_every_chart_kind() -> None:
    import subprocess
    import sys

    from tuning.cli import compare as cli_dashboard

    assert cli_dashboard.CHART_KINDS == kinds.CHART_KINDS
    code = (
        "import sys, tuning.cli.main as m; m.build_parser(); "
        "sys.exit(1 if {'altair', 'pandas', 'streamlit'} & set(sys.modules) else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
