"""Runs imported from another tool's result file (tuning.experiment.imported): the comparability
line said "All N runs are comparable: same ... engine and vLLM version, hardware" and only a later
note said their fingerprint is incomplete. The line claims only what was checked: it says first,
once, that they were imported and which parts of the fingerprint are unknown, in compare's text,
the report and the Compare page (AppTest)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.apptest import open_page, with_query
from tuning.cli.main import main as cli_main
from tuning.experiment.imported import import_field
from tuning.present.report import build_report

VLLM = Path(__file__).resolve().parents[2] / "fixtures" / "field" / "vllm_bench_serve.json"
UNKNOWN = "the file does not hold the engine, its vLLM version, the hardware or the server's"


def _imported(db: Path, tmp_path: Path) -> int:
    """Two values of max-num-seqs, two imported runs each (latencies scaled: other runs)."""
    eid = None
    for name, factor, value in (("a", 1.0, "16"), ("b", 1.01, "16"), ("c", 1.5, "64")):
        doc = json.loads(VLLM.read_text())
        doc["ttfts"] = [t * factor for t in doc["ttfts"]]
        doc["latencies"] = [t * factor for t in doc["latencies"]]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        done = import_field(db, path, param="max-num-seqs", value=value, experiment_id=eid)
        eid = done.experiment_id
    assert eid is not None
    return eid


def test_compare_says_imported_first_and_claims_nothing_unknown(
    fresh_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    eid = _imported(fresh_db, tmp_path)
    capsys.readouterr()
    assert cli_main(["compare", "--db", str(fresh_db), "--experiment", str(eid)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    # the comparability line: the first of the lines that speak of comparing or importing
    first = next(x for x in lines if "comparable" in x or "Imported from" in x)
    assert first.startswith("Imported from result files: 3 of 3 runs"), first
    assert UNKNOWN in first and "max-num-seqs" in first
    assert "are comparable" not in text and "same workload fingerprint, model, engine" not in text
    assert text.count("Imported from result files") == 1


def test_the_report_says_it_once_in_its_comparability_section(
    fresh_db: Path, tmp_path: Path
) -> None:
    page = build_report(fresh_db, experiment_ids=[_imported(fresh_db, tmp_path)])
    section = page.split('<section id="comparability">', 1)[1].split("</section>", 1)[0]
    assert section.startswith('<h2>Comparability</h2><p class="warn">Imported from result')
    assert UNKNOWN in section
    assert "are comparable" not in page and page.count("Imported from result files") == 1


def test_the_compare_page_says_it_as_a_warning(
    fresh_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNING_LAB_DB", str(fresh_db))
    at = open_page(
        "app_pages/4_Compare.py", with_query("experiment", _imported(fresh_db, tmp_path))
    )
    warned = [w.value for w in at.warning if "Comparability" in w.value]
    assert warned and "Imported from result files" in warned[0] and UNKNOWN in warned[0]
    shown = "\n".join(str(x.value) for x in (*at.caption, *at.warning, *at.markdown))
    assert "are comparable" not in shown
