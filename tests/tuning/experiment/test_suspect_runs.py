"""Issue 41, case 3, through the lab's own runner: a server whose `usage` lies makes its run
`suspect`, not `done`.

Seen on 9aeadaf: `usage.completion_tokens=1e9, prompt_tokens=-5` after 3 chunks stored
581,142,450,502 tok/s and -40 input tokens, run `done`. Here the fake vLLM forges its usage for
max-num-seqs = 4 only: that run is suspect with the words stored, no impossible number is stored,
the next value is measured as usual, and `runs` and `compare` say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.plausible import MAX_TOKENS_PER_S
from store import connect, queries
from tests.fakes.engines import fake_spec
from tuning.cli.main import main
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

WL = Workload(num_requests=4, concurrency=2, input_len=8, output_len=3, num_warmups=1)
FORGED = "forged_output_tokens=1e9@max-num-seqs=4,forged_prompt_tokens=-5@max-num-seqs=4"


@pytest.fixture
def lab(no_leftovers: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, int]:
    """An experiment of max-num-seqs = 4, 2 run on the fake, the first value's usage forged."""
    monkeypatch.delenv("FAKE_VLLM_FAULTS", raising=False)
    db_path = no_leftovers / "lab.db"
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4, 2], workload=WL, engine=fake_spec(FORGED)
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=30)
    return db_path, exp_id


def runs_by_value(db_path: Path, exp_id: int) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = {r["value"]: r for r in queries.list_runs(db, exp_id, include_hidden=True)}
        requests = queries.get_requests(db, int(runs["4"]["id"]))
    runs["4"]["requests"] = requests
    return exp, runs


def test_a_lying_usage_makes_the_run_suspect_and_stores_no_impossible_number(
    lab: tuple[Path, int],
) -> None:
    exp, runs = runs_by_value(*lab)
    forged, honest = runs["4"], runs["2"]
    assert forged["status"] == "suspect", forged.get("failure_reason")
    reasons = forged["health"]["suspect"]
    print(reasons)
    assert any(
        "server's usage says 1,000,000,000 output tokens for a stream of" in r
        and "3 were asked for (max_tokens)" in r
        and "-5 input tokens" in r
        for r in reasons
    )
    # nothing impossible stored: no forged count on a request, no throughput past any server
    assert all(r.output_tokens is None and r.prompt_tokens is None for r in forged["requests"])
    assert all(r.error_kind == "implausible_usage" for r in forged["requests"])
    assert (forged["total_input_tokens"] or 0) >= 0
    assert (forged["output_throughput"] or 0.0) <= MAX_TOKENS_PER_S
    # the experiment went on: the honest value is measured and done
    assert honest["status"] == "done" and honest["completed"] == WL.num_requests
    assert exp["status"] == "done"


def test_runs_and_compare_say_why_and_count_it_only_when_asked(
    lab: tuple[Path, int], capsys: pytest.CaptureFixture[str]
) -> None:
    db_path, exp_id = lab
    _, runs = runs_by_value(db_path, exp_id)
    suspect_id = int(runs["4"]["id"])
    assert main(["runs", "--db", str(db_path), "--experiment", str(exp_id)]) == 0
    table = capsys.readouterr().out
    line = next(x for x in table.splitlines() if x.split()[:1] == [str(suspect_id)])
    assert "suspect" in line and "[suspect: " in line and "1,000,000,000 output tokens" in line
    assert main(["runs", "--db", str(db_path), "--experiment", str(exp_id), "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows[suspect_id]["status"] == "suspect" and rows[suspect_id]["suspect_reasons"]
    assert rows[int(runs["2"]["id"])]["suspect_reasons"] == []

    args = ["compare", "--db", str(db_path), "--experiment", str(exp_id), "--json"]
    assert main(args) == 0
    left_out = json.loads(capsys.readouterr().out)
    base = left_out["baseline"]
    assert suspect_id in base["run_ids"] and base["suspect"] == []  # listed, not counted
    assert main(["compare", "--db", str(db_path), "--experiment", str(exp_id)]) == 0
    text = capsys.readouterr().out
    assert f"Suspect runs, not counted in the verdicts: run {suspect_id}: " in text
    assert main([*args, "--include-suspect"]) == 0
    counted = json.loads(capsys.readouterr().out)
    assert counted["baseline"]["suspect"] and str(suspect_id) in counted["baseline"]["suspect"][0]
