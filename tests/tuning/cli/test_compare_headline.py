"""Issue 23 item 1, issue 37 item 1 in the CLI: `compare` opens with the headline decision (the
experiment's own record: its primaries, its rule, the recommendation it allows), and `--json`
carries it as `headline` and `decision` (the committed H200 decisions example, read-only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import seed_lab
from tuning.cli.main import main as cli_main

REPO = Path(__file__).resolve().parents[3]
DECISIONS = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"
SENTENCE = (
    "kv-cache-memory-bytes 16 GiB vs 1 GiB: objective output throughput +212.6 % (better); "
    "guards p99 TTFT -93.4 % (better), p99 TPOT -21.7 % (undecided); 18 other metrics for "
    "information, not corrected"
)


def test_compare_text_opens_with_the_headline(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["compare", "--db", str(DECISIONS), "--experiment", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == SENTENCE
    assert lines[1].startswith("Judged by repeat until decided: looks at 2, 3 runs a side")
    assert lines[2].startswith("Recommendation: Set kv-cache-memory-bytes = 16 GiB: ")
    assert lines[3] == "" and lines[4].startswith("All 4 runs are comparable")
    assert sum(line.startswith("Recommendation") for line in lines) == 1  # said once


def test_compare_json_carries_the_headline(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["compare", "--db", str(DECISIONS), "--experiment", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["headline"] == [SENTENCE]
    assert data["headline_recommendation"].startswith("Set kv-cache-memory-bytes = 16 GiB")
    assert len(data["headline"]) == len(data["candidates"])
    assert data["decision"]["rule"] == "sequential" and data["decision"]["recommended"]


def test_one_sentence_per_candidate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "lab.db"
    info = seed_lab(path, values=(2, 16, 64), repeats=2, with_secrets=False)
    args = ["compare", "--db", str(path), "--experiment", str(info["experiment_id"])]
    assert cli_main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["headline"]) == len(data["candidates"]) >= 1
    assert all(" vs 2: " in s for s in data["headline"])
    assert cli_main(args) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[: len(data["headline"])] == data["headline"]
