"""Issue 37 items 1 and 5 in `compare` (text and --json) and the HTML report: an experiment its own
rule (repeat until decided) left undecided reads undecided, with what would decide it and the
command, although a plain 95 % interval over all its runs excludes zero (compare used to headline
it "better" and recommend it); runs a user picks are an ad-hoc look, never a recommendation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import add_undecided_experiment
from tuning.cli.main import main as cli_main
from tuning.present.report import build_report


def _compare(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert cli_main(["compare", *args]) == 0
    return capsys.readouterr().out


def test_compare_text_reads_the_rules_undecided(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = add_undecided_experiment(fresh_db)
    out = _compare(capsys, "--db", str(fresh_db), "--experiment", str(exp))
    lines = out.splitlines()
    assert lines[0].startswith(
        "stream-interval 16 vs 1: objective output throughput +14.3 % (undecided); guards"
    )
    assert lines[1].startswith("Judged by repeat until decided: looks at 2, 3 runs a side")
    assert lines[2].startswith("Not decided: 2 more runs a side, about ")
    assert f"--resume {exp} --max-repeats 5" in lines[2]
    assert "Recommendation" not in out and "(better)" not in lines[0]
    table = next(x for x in lines if x.strip().startswith("output throughput"))
    assert "objective" in table and "undecided (99.2 % CI" in table
    assert "? undecided" not in out  # the verdict's word, no "?" before it (issue 40)


def test_compare_json_reads_the_rules_undecided(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp = add_undecided_experiment(fresh_db)
    data = json.loads(_compare(capsys, "--db", str(fresh_db), "--experiment", str(exp), "--json"))
    assert data["decision"]["rule"] == "sequential" and data["decision"]["recommended"] is None
    assert data["decision"]["values"][0]["outcome"] == "undecided"
    assert data["headline_recommendation"] is None
    assert "(undecided)" in data["headline"][0]
    assert data["next_step"]["runs_a_side"] == 2 and "--resume" in data["next_step"]["command"]
    row = next(
        r for r in data["rows"] if r["metric"] == "output_throughput" and r["role"] == "candidate"
    )
    assert row["verdict"] == "undecided" and row["metric_role"] == "objective"
    info = next(
        r for r in data["rows"] if r["metric"] == "mean_ttft_ms" and r["side"] == row["side"]
    )
    assert info["metric_role"] == "for information, not corrected"
    assert data["prefer_default"]["recommendation"] == "none"


def test_the_report_reads_the_rules_undecided(fresh_db: Path) -> None:
    exp = add_undecided_experiment(fresh_db)
    page = build_report(fresh_db, experiment_ids=[exp], kinds=())
    head = page[page.index('<section id="headline">') :]
    head = head[: head.index("</section>")]
    assert "objective output throughput +14.3 % (undecided)" in head
    assert "<b>Not decided:</b> 2 more runs a side" in head
    assert "Recommendation:" not in head and "(better)" not in head
    assert 'data-role="objective">objective: undecided: output throughput' in page


def test_runs_named_one_by_one_are_an_adhoc_look(
    fresh_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_undecided_experiment(fresh_db)
    out = _compare(capsys, "--db", str(fresh_db), "1", "2", "3", "4", "5", "6")
    lines = out.splitlines()
    # a plain 95 % each: the same runs read "better" here, and it says what that look is
    assert lines[0].startswith(
        "stream-interval 16 vs 1 (ad-hoc look, uncorrected): objective output throughput "
        "+14.3 % (better)"
    )
    assert lines[1].startswith("Ad-hoc look (runs named one by one): no stopping rule")
    assert lines[2].startswith("No recommendation: an ad-hoc look")
    assert "Recommendation:" not in out
