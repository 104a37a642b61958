"""The offline HTML report: configuration diff, table, verdicts and every chart in one file that
fetches nothing, with every DB string escaped and secrets scrubbed."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from core.redact import REDACTED
from store import open_db, queries, repo
from store.bundle import export_bundle, import_bundle
from tests.checks import start_tags
from tests.factories import SECRETS, seed_clean_lab, seed_drifting_lab, seed_lab
from tuning.cli.main import main as cli_main
from tuning.present.charts import kinds as ch
from tuning.present.export import network_references
from tuning.present.report import (
    CSP,
    ReportError,
    build_report,
    inline_svg,
    report_file_name,
    write_report,
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("report")
    path = home / "lab.db"
    info = seed_lab(path, repeats=3)
    return {"path": path, **info}


@pytest.fixture(scope="module")
def full_report(lab: dict[str, Any]) -> str:
    """The whole report with every chart kind (rendered once for the module: a few seconds)."""
    return build_report(lab["path"], experiment_ids=[lab["experiment_id"]])


def test_report_has_every_part_and_every_chart(full_report: str) -> None:
    page = full_report
    for section in (
        "experiment",
        "comparability",
        "verdicts",
        "configuration",
        "table",
        "charts",
        "runs",
        "failures",
        "definitions",
    ):
        assert f'<section id="{section}">' in page, section
    assert re.search(
        r'<table id="config-diff">.*?<code>max-num-seqs</code></td><td>2</td>'
        r"<td>16</td><td>64</td>",
        page,
        re.DOTALL,
    )
    assert "▼ worse" in page and "mean TTFT" in page and "95 % CI" in page
    kinds = re.findall(r'<figure class="chart" data-kind="([a-z]+)">', page)
    assert kinds == list(ch.CHART_KINDS)
    assert page.count("<svg") == len(ch.CHART_KINDS)
    for svg in re.findall(r"<svg[^>]*>", page):
        width = re.search(r'width="(\d+)"', svg)
        assert width and int(width.group(1)) > 100
    assert "ada@box-a" in page and "All 9 runs are comparable" in page
    assert "failed [out of memory]" in page and "lower max-num-seqs" in page  # kind in words


def test_report_fetches_nothing_and_runs_nothing(full_report: str) -> None:
    page = full_report
    assert network_references(page) == []
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP}">' in page
    assert "default-src 'none'" in CSP and "script-src" not in CSP
    for tag, attrs in start_tags(page):
        assert tag not in ("script", "iframe", "object", "embed", "link", "img", "base"), tag
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("src", "href", "xlink:href") and value:
                assert value.startswith(("#", "data:")), (tag, name, value)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "").replace(
        'xmlns:xlink="http://www.w3.org/1999/xlink"', ""
    )
    assert "https://" not in page


def test_secrets_are_not_in_the_report(full_report: str) -> None:
    for secret in SECRETS:
        assert secret not in full_report
    assert REDACTED in full_report  # the failed run's log excerpt, scrubbed


def test_text_from_the_db_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / "lab.db"
    info = seed_lab(path, values=(2, 16), repeats=1, with_failed=True, with_secrets=False)
    db = open_db(path)
    evil = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    repo.update_experiment(db, info["experiment_id"], name=f"sweep {evil}", notes=evil, tags=evil)
    for rid in info["run_ids"]:
        run = queries.get_run(db, rid)
        if run["value"] == "16":
            repo.update_run(db, rid, value=f"16{evil}", hardware="cpu-test")
        if run["status"] == "failed":
            repo.update_run(db, rid, failure_reason=evil, log_tail=evil)
    db.conn.close()
    page = build_report(path, experiment_ids=[info["experiment_id"]], kinds=("throughput",))
    assert [t for t, _ in start_tags(page) if t in ("script", "img")] == []
    assert "&lt;script&gt;" in page
    assert page.count("<svg") == 1


def test_comparison_of_teammates_runs(lab: dict[str, Any], tmp_path: Path) -> None:
    """Bob's runs (other hardware) imported next to Ada's: the report names both and says why
    Bob's are left out."""
    bob = tmp_path / "bob.db"
    bob_info = seed_clean_lab(
        bob, "bob", "box-b", hardware="gpu-h100", values=(16,), repeats=2, seed=9
    )
    bundle = tmp_path / "bob.bundle.zip"
    export_bundle(
        bob, bundle, experiment_ids=[bob_info["experiment_id"]], author="bob", host="box-b"
    )
    mine = tmp_path / "mine.db"
    mine_info = seed_clean_lab(mine, values=(2, 16), repeats=2)
    result = import_bundle(mine, bundle)
    ids = [mine_info["run_ids"][0], mine_info["run_ids"][2], *result.runs_added]
    page = build_report(mine, run_ids=ids, kinds=("throughput",))
    assert "Comparison of 4 runs" in page
    assert "ada@box-a" in page and "bob@box-b" in page
    assert "different hardware: cpu-test vs gpu-h100" in page
    assert "from bob@box-b" in page  # the origin column of the imported runs
    assert 'id="not-comparable"' in page


def test_write_report_and_cli(
    lab: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = write_report(
        lab["path"],
        tmp_path / "sub" / "r.html",
        run_ids=lab["run_ids"][:2],
        kinds=("throughput",),
        title="Two runs",
    )
    assert (
        out.read_text().startswith("<!DOCTYPE html>")
        and "<title>Two runs</title>" in out.read_text()
    )
    assert not list(out.parent.glob(".*partial"))
    target = tmp_path / "cli.html"
    assert (
        cli_main(
            [
                "report",
                "--db",
                str(lab["path"]),
                str(lab["run_ids"][0]),
                str(lab["run_ids"][1]),
                "--out",
                str(target),
            ]
        )
        == 0
    )
    assert target.exists() and "<svg" in target.read_text()
    capsys.readouterr()
    assert (
        cli_main(
            [
                "report",
                "--db",
                str(lab["path"]),
                "--experiment",
                "999",
                "--out",
                str(tmp_path / "x.html"),
            ]
        )
        == 1
    )
    assert "no experiment 999" in capsys.readouterr().err
    assert cli_main(["report", "--db", str(lab["path"]), "--out", str(tmp_path / "x.html")]) == 1
    assert (
        cli_main(["report", "--db", str(lab["path"]), "1", "--out", str(tmp_path / "x.png")]) == 1
    )
    with pytest.raises(ReportError, match="no run 4242"):
        build_report(lab["path"], run_ids=[4242])
    with pytest.raises(ReportError, match="no lab database"):
        build_report(tmp_path / "none.db", run_ids=[1])


def test_report_file_names() -> None:
    assert report_file_name(12) == "report-exp12.html"
    assert report_file_name(None, [3, 4]) == "report-runs-3-4.html"
    assert report_file_name(None, list(range(20))).endswith("-more.html")
    assert report_file_name(None, []) == "report-selection.html"


def test_inline_svg_keeps_ids_apart_and_strips_anything_active() -> None:
    svg = (
        '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><defs>'
        '<clipPath id="clip1"><rect/></clipPath></defs><g clip-path="url(#clip1)" '
        'onclick="alert(1)"><use href="#clip1"/></g><script>alert(2)</script></svg>'
    )
    out = inline_svg(svg, "c3")
    assert out.startswith("<svg") and 'id="c3-clip1"' in out
    assert "url(#c3-clip1)" in out and 'href="#c3-clip1"' in out
    assert "onclick" not in out and "<script" not in out


def test_undecided_rows_are_grey_in_the_report_table() -> None:
    """Issue 23, item 3: the report's table colours only decided verdicts; its tone classes are
    the shared ones (tuning.compare.present.tone_css), with no direction-tinted 'faint' tones."""
    from tests.factories import undecided_and_better_runs
    from tuning.compare.comparison import build_comparison
    from tuning.compare.present import tone_css
    from tuning.present.report import STYLE
    from tuning.present.report_verdicts import table_section

    assert tone_css() in STYLE and "faint" not in STYLE
    html = table_section(build_comparison(undecided_and_better_runs(), [1, 2]))
    rows = {r.split("</td>")[0]: r for r in html.split("<tr>")[1:]}
    tput = next(r for k, r in rows.items() if "output throughput" in k)
    ttft = next(r for k, r in rows.items() if "mean TTFT" in k)
    assert "undecided" in tput
    assert not any(c.endswith(("better", "worse")) for c in re.findall(r'class="([^"]*)"', tput))
    decided = [c for c in re.findall(r'class="([^"]*)"', ttft) if c.endswith("better")]
    assert len(decided) == 2  # the candidate's change and its verdict


def test_report_states_the_baseline_drift_beside_the_verdicts(tmp_path: Path) -> None:
    """Issue 25, item 5: the verdicts section says how far the baseline drifted."""
    info = seed_drifting_lab(tmp_path / "lab.db")
    page = build_report(tmp_path / "lab.db", experiment_ids=[info["experiment_id"]])
    verdicts = page[page.index('<section id="verdicts">') :]
    verdicts = verdicts[: verdicts.index("</section>")]
    found = re.search(r'<p class="muted" id="baseline-drift">([^<]*)</p>', verdicts)
    assert found, verdicts
    assert "output throughput -6.0 %" in found.group(1)
    assert f"first run {info['run_ids'][0]} → last run {info['run_ids'][6]}" in found.group(1)


def test_the_h200_reports_show_no_change_below_minus_100() -> None:
    """Issue 23, item 2 in the report: on the H200 decisions lab, experiment 1 read "mean TTFT
    -95.6 % (95 % CI -110.9 ... -80.3 %)"; its report now shows no change or interval end below
    -100 %, and the checker finds the old line."""
    from store.snapshot import expanded
    from tests.checks import below_minus_100
    from tuning.present.report import build_report

    db = expanded(
        Path(__file__).resolve().parents[3] / "examples" / "h200" / "lab-h200-decisions.db.xz"
    )
    html = build_report(db, experiment_ids=[1])
    assert "mean TTFT" in html and "95 % CI" in html
    assert below_minus_100(html) == []
    assert below_minus_100("-95.6 % (95 % CI -110.9 … -80.3 %)") == ["-110.9"]
