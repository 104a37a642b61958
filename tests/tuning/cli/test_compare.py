"""`compare` and `chart` from the command line: text and JSON, SLOs, the baseline flag, and the
chart file written in the format its name asks for."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.factories import seed_drifting_lab
from tuning.cli.main import main as cli_main
from tuning.present import export


def test_cli_compare_text_and_json(
    charts_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    ids = [str(r["id"]) for r in charts_lab["runs"]]

    def compare(*args: str) -> int:
        return cli_main(["compare", "--db", str(charts_lab["path"]), *args])

    assert compare(*ids) == 0
    out = capsys.readouterr().out
    assert "Baseline: block-size = 16" in out and "worse" in out and "mean TTFT" in out
    assert compare("--json", "--goodput", "ttft:105", "--experiment", str(charts_lab["exp"])) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["slo_ms"] == {"ttft": 105.0}
    assert any(r["metric"] == "request_goodput" for r in data["rows"])
    # the baseline flag flips the roles
    eight = [r["id"] for r in charts_lab["runs"] if r["value"] == "8"][0]
    assert compare("--baseline", str(eight), "--json", *ids) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {(r["side"], r["metric"]): r for r in data["rows"]}
    assert rows[("block-size = 16", "mean_ttft_ms")]["verdict"] == "better"
    # run ids right after --goodput values still count as runs
    assert compare("--json", "--goodput", "ttft:105", "tpot:50", *ids) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["slo_ms"] == {"ttft": 105.0, "tpot": 50.0} and len(data["candidates"]) == 1
    assert compare("999") == 1
    assert compare("--goodput", "itl:4", *ids) == 1


def test_compare_experiment_prints_what_the_command_prints(
    charts_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo's closing comparison, called directly (not through main): the same report."""
    from tuning.cli.compare import compare_experiment

    path, exp = charts_lab["path"], charts_lab["exp"]
    assert cli_main(["compare", "--db", str(path), "--experiment", str(exp)]) == 0
    by_command = capsys.readouterr().out
    assert compare_experiment(Path(path), exp) == 0
    assert capsys.readouterr().out == by_command and "Baseline: block-size = 16" in by_command


def test_cli_chart(charts_lab: dict[str, Any], tmp_path: Path) -> None:
    ids = [str(r["id"]) for r in charts_lab["runs"]]

    def chart(kind: str, out: Path, *selection: str) -> int:
        return cli_main(
            [
                "chart",
                "--db",
                str(charts_lab["path"]),
                "--kind",
                kind,
                "--out",
                str(out),
                *selection,
            ]
        )

    out = tmp_path / "kv.svg"
    assert chart("kv", out, *ids) == 0
    ET.fromstring(out.read_bytes())
    html = tmp_path / "lat.html"
    assert chart("latency", html, "--experiment", str(charts_lab["exp"])) == 0
    assert not export.network_references(html.read_text())
    assert chart("cdf", tmp_path / "x.pdf", *ids) == 1


H200 = Path(__file__).resolve().parents[3] / "examples" / "h200"


@pytest.mark.parametrize("db", ["lab-h200-decisions.db.xz", "lab-h200.db.xz"])
def test_cli_compare_json_never_has_a_percent_interval_below_minus_100(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 23, item 2: on the H200 example, experiment 1 read "mean TTFT -95.6 % (95 % CI
    -110.9 ... -80.3 %)"; on the log scale of the ratio every % interval stays above -100 %."""
    assert cli_main(["compare", "--db", str(H200 / db), "--experiment", "1", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    lows = [r["ci_low_pct"] for r in rows if r["ci_low_pct"] is not None]
    assert lows and min(lows) >= -100.0
    ttft = [r for r in rows if r["metric"] == "mean_ttft_ms" and r["role"] == "candidate"]
    assert all(r["ci_scale"] == "log" and r["ci_low_pct"] > -100.0 for r in ttft)
    assert all(r["ci_scale"] in ("log", "difference") for r in rows if r["ci_low_pct"] is not None)


def test_cli_compare_shows_the_baseline_drift_beside_the_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25, item 5: text and --json carry the baseline's first-vs-last drift."""
    info = seed_drifting_lab(tmp_path / "lab.db")
    first, last = info["run_ids"][0], info["run_ids"][6]  # the baseline's first and last runs
    args = ["compare", "--db", str(tmp_path / "lab.db"), "--experiment", str(info["experiment_id"])]
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    line = f"Drift of the baseline, first run {first} → last run {last}: output throughput -6.0 %"
    assert line in out
    assert out.index("Candidate: ") < out.index(line) < out.index("Verdict: ")
    assert cli_main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    drift = {d["metric"]: d for d in data["baseline_drift"]}
    assert drift["output_throughput"]["change_pct"] == pytest.approx(-6.0)
    assert (drift["output_throughput"]["first_run"], drift["output_throughput"]["last_run"]) == (
        first,
        last,
    )
