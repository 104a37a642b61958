"""Issue 41, case 4: a reaped or interrupted step is never evidence of a start limit, and a search
run again resumes from what was measured.

Seen: a killed search, run again, read its reaped run (`runner_died`) as a failed start and spent
two of six runs bisecting "max-num-seqs = 16 starts, 20 does not" while 64 ran at 9,781 tok/s.
Here the steps are written the way the runner and the reaper leave them (unit), and a real search
on the fake vLLM is SIGKILLed mid-step and run again (end to end)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import numpy as np
import pytest

from store import connect, queries, repo
from tests.factories import add_experiment, add_run
from tests.fakes.engines import fake_settings_env
from tuning.decide.search import driver
from tuning.decide.search.driver import SearchSpec, StepUnmeasured, observations, run_search
from tuning.decide.search.record import recorded, step_prefix
from tuning.decide.search.strategy import Space, next_step, start_limit
from tuning.engine.procs import same_process, stop_group
from tuning.measure.traffic.workload import Workload

REPO = Path(__file__).resolve().parents[3]
# max-num-seqs 4..64 in three coarse points: 4, 16, 64 (geometric)
COARSE = [4.0, 16.0, 64.0]


def _spec() -> SearchSpec:
    return SearchSpec(
        param="max-num-seqs",
        space=Space(4, 64, True),
        objective="output_throughput",
        workload=Workload(num_requests=4, concurrency=2, input_len=4, output_len=3),
        engine=None,
        budget_runs=6,
        coarse=3,
    )


def _seed(db_path: Path, middle: dict[str, Any]) -> None:
    """Three steps: 4 and 64 done, 16 as `middle` says (a run's status and failure kind)."""
    spec = _spec()
    rng = np.random.default_rng(0)
    with connect(db_path) as db:
        for seq, value in enumerate((4, 16, 64)):
            name = f"{step_prefix(spec.key())} max-num-seqs = {value}"
            exp = add_experiment(db, values=[value], name=name, notes=f"coarse {seq + 1}")
            rid = add_run(db, exp, seq=0, value=value, rng=rng)
            if value == 16:
                repo.update_run(db, rid, **middle)


# How the lab leaves a step it never measured: reaped after a SIGKILL, interrupted by Ctrl-C or
# SIGTERM, still open (killed, not yet reaped), or failed for the lab's own reason.
UNMEASURED = {
    "reaped": {"status": "failed", "failure_kind": "runner_died"},
    "interrupted": {"status": "cancelled", "failure_reason": "interrupted by SIGTERM"},
    "open": {"status": "running"},
    "lab_error": {"status": "failed", "failure_kind": "lab_error"},
    "measurement_error": {"status": "failed", "failure_kind": "measurement_error"},
    "stop_failed": {"status": "failed", "failure_kind": "stop_failed"},
    "port_in_use": {"status": "failed", "failure_kind": "port_in_use"},
}


@pytest.mark.parametrize("how", sorted(UNMEASURED))
def test_an_unmeasured_step_is_no_start_limit_and_is_measured_again(
    fresh_db: Path, how: str
) -> None:
    _seed(fresh_db, UNMEASURED[how])
    stored = observations(fresh_db, _spec())
    obs, log = stored.obs, stored.log
    assert [o.value for o in obs] == [4.0, 64.0] and all(o.started for o in obs)
    assert start_limit(obs) is None  # 64 ran: nothing says 16 does not start
    step = next_step(_spec().space, obs, budget_runs=6, coarse=3)
    assert step.value == 16.0 and step.why.startswith("coarse pass")  # measured again
    assert len(obs) == 2  # and it spent nothing of the budget
    in_log = [e["value"] for e in log]
    assert in_log == ([4.0, 16.0, 64.0] if how == "open" else [4.0, 64.0])  # in progress: shown


@pytest.mark.parametrize("kind", ["out_of_memory", "invalid_argument", "engine_init", "timeout"])
def test_a_failed_start_stays_evidence_of_a_start_limit(fresh_db: Path, kind: str) -> None:
    _seed(fresh_db, {"status": "failed", "failure_kind": kind})
    obs = observations(fresh_db, _spec()).obs
    assert [(o.value, o.started) for o in obs] == [(4.0, True), (16.0, False), (64.0, True)]
    assert start_limit(obs) == (4.0, 16.0)


@pytest.mark.parametrize("kind", ["requests_failed", "engine_died"])
def test_a_value_whose_server_was_healthy_started(fresh_db: Path, kind: str) -> None:
    """Every request failed, or the engine died under load: the server had answered /health, so
    the value started (no score, no start limit)."""
    _seed(fresh_db, {"status": "failed", "failure_kind": kind})
    obs = observations(fresh_db, _spec()).obs
    assert [(o.value, o.started, o.score is None) for o in obs] == [
        (4.0, True, False),
        (16.0, True, True),
        (64.0, True, False),
    ]
    assert start_limit(obs) is None


# How the step's run ends -> what the search's row says, and the reason's words.
STEP_ENDS = {
    "lab_error": (
        {"status": "failed", "failure_kind": "lab_error"},
        "failed",
        "failed (a lab error: x)",  # the kind in words, as the step lines say it
    ),
    "cancelled": ({"status": "cancelled"}, "cancelled", "cancelled (x)"),
}


@pytest.mark.parametrize("how", sorted(STEP_ENDS))
def test_a_step_that_measures_nothing_stops_the_search_instead_of_looping(
    fresh_db: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A lab failure in a step (here each time), or a step the user cancelled, ends the search
    with a one-line reason (failed, or cancelled); it is not a failed start, and the same value
    is not tried again and again."""
    fields, search_status, words = STEP_ENDS[how]
    calls: list[int] = []

    def step_ends(db_path: Path, exp_id: int, **_: Any) -> list[int]:
        calls.append(exp_id)
        with connect(db_path) as db:
            rid = repo.create_run(
                db, experiment_id=exp_id, seq=0, param="concurrency", value="1", status="running"
            )
            repo.update_run(db, rid, failure_reason="x", **fields)
            repo.update_experiment(db, exp_id, status=fields["status"])
        return [rid]

    monkeypatch.setattr(driver, "run_experiment", step_ends)
    spec = SearchSpec(
        param="concurrency",
        space=Space(1, 4, True),
        objective="output_throughput",
        workload=Workload(num_requests=2, concurrency=1, input_len=4, output_len=2),
        engine=None,
        base_url="http://127.0.0.1:9/v1",
        model="m",
        budget_runs=4,
        coarse=2,
    )
    with pytest.raises(StepUnmeasured) as stopped, recorded(fresh_db, spec):
        run_search(fresh_db, spec)
    assert len(calls) == 1
    message = str(stopped.value)
    assert f"concurrency = 1, measured nothing: run 1 {words}" in message
    assert "run the same search again" in message and "\n" not in message
    stored = observations(fresh_db, spec)
    assert (stored.obs, stored.log, stored.used) == ([], [], 0)
    with connect(fresh_db, readonly=True) as db:
        (row,) = queries.list_searches(db)
    assert row["status"] == search_status and "measured nothing" in row["error"]


# ------------------------------------------------------------------------------------------------
# End to end: a search SIGKILLed during a step's start, run again
# ------------------------------------------------------------------------------------------------

SEARCH = ["search", "--param", "max-num-seqs", "--range", "4:64", "--coarse", "3"]
SEARCH += ["--budget-runs", "3", "--concurrency", "1", "--num-requests", "2", "--input-len", "4"]
SEARCH += ["--output-len", "2", "--num-warmups", "0", "--start-timeout", "120", "--json"]


def _runs(db_path: Path) -> list[dict[str, Any]]:
    if not db_path.exists():
        return []
    with connect(db_path, readonly=True) as db:
        if "runs" not in db.table_names():  # the search is still creating the lab's DB
            return []
        return queries.list_runs(db, include_hidden=True)


def _wait_for(what: Callable[[], Any], timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := what():
            return found
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


@pytest.fixture
def leftovers() -> Iterator[list[tuple[int, float]]]:
    """Servers (pid, start time) the test may leave behind when the lab does not stop them."""
    found: list[tuple[int, float]] = []
    yield found
    for pid, started in found:
        if same_process(pid, started):
            stop_group(pid)


def test_a_killed_search_run_again_measures_the_killed_value_and_reuses_the_rest(
    lab_home: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
    leftovers: list[tuple[int, float]],
) -> None:
    db_path = lab_home / "lab.db"
    args = [*SEARCH, "--db", str(db_path)]
    # the first call: 4 runs, then 16 starts slowly and the search is SIGKILLed during its start
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.update(fake_settings_env(lab_home, faults="slow_start=120@max-num-seqs=16"))
    search = subprocess.Popen(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        starting = _wait_for(
            lambda: next(
                (
                    r
                    for r in _runs(db_path)
                    if r["value"] == "16" and r["status"] == "running" and r.get("server_pid")
                ),
                None,
            )
        )
        leftovers.append((int(starting["server_pid"]), float(starting["server_start_time_s"])))
        first = [r for r in _runs(db_path) if r["value"] == "4"]
        assert [r["status"] for r in first] == ["done"]
    finally:
        search.send_signal(signal.SIGKILL)
        search.wait(30)

    again = tuning_cli(args, lab_home, env=fake_settings_env(lab_home), timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    result = json.loads(again.stdout)
    assert result["start_limit"] is None, result["log"]  # 16 was killed, not refused
    assert f"reaped experiment {starting['experiment_id']}" in again.stderr
    assert [e["value"] for e in result["log"]] == COARSE
    assert all(e["status"] == "done" for e in result["log"])
    assert not any(e["why"].startswith("start limit") for e in result["log"])
    assert result["runs"][0] == first[0]["id"]  # 4 was measured: reused, not run again
    runs = {int(r["id"]): r for r in _runs(db_path)}
    killed = runs[int(starting["id"])]
    assert (killed["status"], killed["failure_kind"]) == ("failed", "runner_died")
    assert int(starting["id"]) not in result["runs"]
    assert len(runs) == 4  # 4, the killed 16, 16 again, 64: nothing else ran
    pid, started = leftovers[0]
    assert not same_process(pid, started)  # the killed step's server was stopped by the reaper
