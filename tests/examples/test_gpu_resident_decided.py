"""Issue 38's GPU acceptance, on the H100 run committed under examples/h200 (the device tool lent an
H100; real vLLM 0.25.0, the 1B dummy Llama, compiled): step (m), a two-value until-decided
experiment of max-num-seqs 8 vs 128 at C=128 with resident engines, 512 requests a run, decided
on its objective and both guards within 4 minutes of wall time including the first starts; each
run's anatomy adds up, and with the experiment's time after its runs gives its wall time; the
resident check and the KV after a wake are stored with their numbers; vLLM's flags were read
beside the first start and the second value's server imported beside the first's load, never
holding device memory before it went. Experiment 2 of the same DB: the same without an explicit
KV budget, which a first sleep-mode start measured from its log."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from store import open_db, queries
from tests.examples import H200, lab_of
from tuning.cli.main import main as cli_main
from tuning.experiment.run_anatomy import adds_up

DB = H200 / "lab-h100-resident-decided.db.xz"
RESULT = H200 / "resident-decided-h100.json"
PROBE = H200 / "resident-probe-h100.json"
DECIDED, PROBED = 1, 2


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return lab_of(DB, tmp_path, monkeypatch)


def _stored(lab: Path, exp_id: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    with open_db(lab) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    return exp, runs


def _seconds(a: str, b: str) -> float:
    return (datetime.fromisoformat(b) - datetime.fromisoformat(a)).total_seconds()


def _part(run: dict[str, Any], key: str, where: str = "parts") -> float:
    return sum(p["seconds"] for p in run["anatomy"][where] if p["key"] == key)


def test_decided_on_its_objective_and_guards_within_four_minutes(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    exp, runs = _stored(lab, DECIDED)
    wall = _seconds(exp["started_at"], exp["finished_at"])
    assert exp["status"] == "done" and wall <= 240, wall
    decision = exp["decision"]
    assert decision["complete"] and decision["reason"] == "every value is decided"
    (value,) = decision["values"]
    verdicts = {m["metric"]: m["verdict"] for m in value["metrics"]}
    assert verdicts == {
        "output_throughput": "better",
        "p99_ttft_ms": "better",
        "p99_tpot_ms": "worse",
    }
    assert len(runs) == 6 and {r["status"] for r in runs} == {"done"}
    # compare says the same
    assert cli_main(["compare", "--db", str(lab), "--experiment", str(DECIDED), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["decision"]["values"][0]["metrics"]
    assert {m["metric"]: m["verdict"] for m in shown} == verdicts
    # every run's anatomy adds up, and with the time after the runs gives the wall time
    assert all(adds_up(r["anatomy"]) for r in runs)
    in_runs = sum(r["anatomy"]["wall_s"] for r in runs) + exp["anatomy"]["after_runs_s"]
    assert in_runs == pytest.approx(wall, rel=0.02)


def test_two_first_starts_then_switches_and_the_checks_stored_with_numbers(lab: Path) -> None:
    exp, runs = _stored(lab, DECIDED)
    modes = [r["startup"].get("resident") for r in runs]
    assert modes == ["start", "start", "switch", "switch", "switch", "switch"]
    state = exp["resident"]
    assert state["starts"] == 2 and state["switches"] == 4 and not state.get("fallback")
    # nothing restarted after each value's first start
    assert [r["seq"] for r in runs if _part(r, "start") > 0] == [0, 1]
    check = state["check"]
    for label in ("8", "128"):
        tput = check["values"][label]["metrics"]["output_throughput"]
        assert len(tput["restarted"]) == 1 and len(tput["switched"]) == 2
    assert state["kv_after_wake"] == {"value": "128", "fresh_tokens": 262144, "woken": 262144}


def test_nothing_waited_for_that_could_go_beside(lab: Path) -> None:
    exp, runs = _stored(lab, DECIDED)
    first, second = runs[0], runs[1]
    # the flags were read beside the first start (18.6 s of this run's prepare on 2026-12-07's
    # first H100 run) and cached
    assert _part(first, "prepare") < 1.0
    with open_db(lab) as db:
        assert db.execute("SELECT COUNT(*) FROM engine_flags").fetchone()[0] == 1
    # the second value's server imported beside the first run's load
    hidden = _part(second, "prelaunch_ahead", "overlapped")
    assert hidden > 10 and second["startup"]["anatomy"]["phases"][0]["key"] == "prelaunch_imports"
    assert second["time_to_healthy_s"] == pytest.approx(_part(second, "start") + hidden, abs=1)
    result = json.loads(RESULT.read_text())
    assert result["experiment"]["id"] == DECIDED and result["hidden_by_prelaunch_s"] == hidden
    holders = result["gpu_memory_holders"]
    assert holders["api_servers_holding_memory"] == []
    assert [p["is"] for p in holders["processes"]] == ["EngineCore of run 0", "EngineCore of run 1"]
    assert result["restart_share_after_first_starts"] == 0.0


def test_without_a_budget_a_first_sleep_mode_start_measured_one(lab: Path) -> None:
    exp, runs = _stored(lab, PROBED)
    state = exp["resident"]
    measured = "90% of the 75,430,363,136 bytes a first sleep-mode start measured"
    assert state["budget_from"] == measured
    assert state["budget_bytes"] == int(75_430_363_136 * 0.9) and not state.get("fallback")
    assert _part(runs[0], "kv_probe") > 0 and all(adds_up(r["anatomy"]) for r in runs)
    assert state["kv_after_wake"]["fresh_tokens"] == state["kv_after_wake"]["woken"] == 2071744
    probe = json.loads(PROBE.read_text())
    assert probe["experiment"]["id"] == PROBED
    assert probe["gpu_memory_holders"]["api_servers_holding_memory"] == []


FINAL = H200 / "lab-h100-resident-final.db.xz"
FINAL_RESULT = H200 / "resident-final-h100.json"


def test_with_every_change_decided_in_under_three_minutes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last try, with the load generator started while the run before it stored and the
    budget priced by which runs switch: decided at 2 runs a side in 161.8 s; the rest of each
    run (neither its start nor its load) under 5 s."""
    lab = lab_of(FINAL, tmp_path, monkeypatch)
    exp, runs = _stored(lab, 1)
    wall = _seconds(exp["started_at"], exp["finished_at"])
    assert exp["status"] == "done" and wall <= 180, wall
    (value,) = exp["decision"]["values"]
    assert {m["metric"]: (m["verdict"], m["decided_at_look"]) for m in value["metrics"]} == {
        "output_throughput": ("better", 2),
        "p99_ttft_ms": ("better", 2),
        "p99_tpot_ms": ("worse", 2),
    }
    assert all(adds_up(r["anatomy"]) for r in runs)
    in_runs = sum(r["anatomy"]["wall_s"] for r in runs) + exp["anatomy"]["after_runs_s"]
    assert in_runs == pytest.approx(wall, rel=0.02)
    rest = [r["anatomy"]["wall_s"] - _part(r, "start") - _part(r, "load") for r in runs]
    assert sum(rest) / len(rest) < 5.0, rest
    # every load generator but the first was started before its run began
    loadgen = [_part(r, "loadgen") for r in runs]
    assert all(s < loadgen[0] for s in loadgen[1:]), loadgen
    # the estimate before it knew the repeats would switch (no flags read yet: the version)
    assert "2 of them switch resident servers" in exp["estimate"]["line"]
    result = json.loads(FINAL_RESULT.read_text())
    assert result["gpu_memory_holders"]["api_servers_holding_memory"] == []
    assert result["restart_share_after_first_starts"] == 0.0
    assert exp["resident"]["kv_after_wake"]["fresh_tokens"] == 262144
