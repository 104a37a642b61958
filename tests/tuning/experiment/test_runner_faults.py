"""Every fault of the fake vLLM, run through the lab's own runner (issue 11, item 12).

Each experiment varies max-num-seqs over 4 then 2 with the fault bound to the first value only
(`FAULT@max-num-seqs=4`), so each test shows: the faulty value's run gets the right failure kind,
the experiment goes on to the next value (which is measured), no process started for the test is
left (conftest's `no_leftovers`), and a foreign process is never signalled.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import psutil
import pytest

from store import connect, queries
from tests.fakes.engines import fake_launch, fake_spec, foreign_listener
from tuning.engine.server import ServerProcess, StartFailure, port_is_free
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

# A stalled start is waited out to this; the other value's fake starts in 1-3 s on a loaded 2-core
# machine, so 10 s proves the timeout as 30 s did, 20 s sooner.
START_TIMEOUT_S = 10.0
QUICK = {"num_requests": 6, "concurrency": 2, "input_len": 8, "output_len": 8, "num_warmups": 1}


def run_faulty(
    home: Path,
    faults: str,
    start_timeout: float = 30.0,
    record: bool = False,
    **workload: Any,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Plan and run `max-num-seqs = 4, 2` on the fake with `faults`; (experiment, runs by value)."""
    db_path = home / "lab.db"
    wl = Workload(**{**QUICK, **workload})
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4, 2], workload=wl, engine=fake_spec(faults)
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=start_timeout)
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = {r["value"]: r for r in queries.list_runs(db, exp_id, include_hidden=True)}
    assert runs["2"]["status"] == "done", runs["2"]  # the experiment went on and measured
    assert runs["2"]["completed"] == wl.num_requests and exp["status"] == "done"
    return exp, runs


@pytest.fixture
def record(no_leftovers: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every fake start appends its pids here (FAKE_VLLM_RECORD)."""
    monkeypatch.delenv("FAKE_VLLM_FAULTS", raising=False)
    path = no_leftovers / "starts.jsonl"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(path))
    return path


def started_pids(record: Path) -> dict[str, int]:
    """The pids of the first start (the faulty value's)."""
    return dict(json.loads(record.read_text().splitlines()[0])["pids"])


@pytest.mark.parametrize(
    ("fault", "kind", "words"),
    [
        ("crash_at_start", "engine_init", "fake_vllm fault crash_at_start"),
        ("oom_at_start", "out_of_memory", "CUDA out of memory"),
        ("slow_start=120", "timeout", f"/health did not answer 200 within {START_TIMEOUT_S:g} s"),
    ],
)
def test_a_start_fault_fails_its_run_with_its_kind(
    no_leftovers: Path, record: Path, fault: str, kind: str, words: str
) -> None:
    _, runs = run_faulty(no_leftovers, f"{fault}@max-num-seqs=4", start_timeout=START_TIMEOUT_S)
    bad = runs["4"]
    assert (bad["status"], bad["failure_kind"]) == ("failed", kind) and words in bad[
        "failure_reason"
    ]
    assert bad["vllm_version"] == "0.32.0+fake"  # read from the log, though the start failed


def test_the_engine_dying_mid_run_fails_the_run_as_engine_died(
    no_leftovers: Path, record: Path
) -> None:
    """The EngineCore dies 1 s into serving while the API server stays up (/health 200 -> 503)."""
    _, runs = run_faulty(
        no_leftovers,
        "engine_dies_after=1@max-num-seqs=4,itl_ms=100@max-num-seqs=4",
        output_len=32,
        num_requests=8,
    )
    bad = runs["4"]
    assert (bad["status"], bad["failure_kind"]) == ("failed", "engine_died")
    assert "illegal memory access" in bad["failure_reason"]  # the engine's own words
    assert (bad["completed"] or 0) < 8  # the load stopped early: 8 x 3.2 s at C=2 would take 13 s
    assert bad["finished_at"] <= runs["2"]["started_at"]  # failed, then the next value ran


def test_a_stalled_stream_fails_the_run(no_leftovers: Path, record: Path) -> None:
    """One token, then nothing: with a short request timeout every request fails."""
    _, runs = run_faulty(no_leftovers, "stall_after=1@max-num-seqs=4", request_timeout_s=2.0)
    assert runs["4"]["status"] == "failed" and runs["4"]["completed"] == 0


@pytest.mark.parametrize(
    ("fault", "error_kind"),
    [
        ("http500_share=1.0", "http"),
        ("inband_error_after=1", "stream_error"),
        ("truncate_after=1", "early_end"),
    ],
)
def test_every_request_failing_fails_the_run_as_requests_failed(
    no_leftovers: Path, record: Path, fault: str, error_kind: str
) -> None:
    _, runs = run_faulty(no_leftovers, f"{fault}@max-num-seqs=4")
    bad = runs["4"]
    assert (bad["status"], bad["failure_kind"]) == ("failed", "requests_failed")
    assert bad["failed"] == QUICK["num_requests"] and bad["completed"] == 0
    assert f"0 of 6 requests completed ({error_kind} x6)" in bad["failure_reason"]


def test_a_share_of_http_500s_is_counted_and_the_run_is_done(
    no_leftovers: Path, record: Path
) -> None:
    _, runs = run_faulty(no_leftovers, "http500_share=0.5@max-num-seqs=4")
    half = runs["4"]
    assert half["status"] == "done" and half["failure_kind"] is None
    assert half["failed"] >= 1 and half["completed"] >= 1
    assert half["failed"] + half["completed"] == QUICK["num_requests"]


@pytest.mark.parametrize("where", ["", "setsid"], ids=["in-group", "left-the-group"])
def test_a_grandchild_ignoring_sigterm_is_gone_and_the_experiment_goes_on(
    no_leftovers: Path, record: Path, where: str
) -> None:
    """That its stop costs no full grace is the next test's (without a stopwatch)."""
    fault = "ignore_sigterm_grandchild" + (f"={where}" if where else "")
    _, runs = run_faulty(no_leftovers, f"{fault}@max-num-seqs=4")
    assert runs["4"]["status"] == "done"
    holder = started_pids(record)["holder"]
    assert not psutil.pid_exists(holder) or psutil.Process(holder).status() == "zombie"


@pytest.mark.parametrize("where", ["", "setsid"], ids=["in-group", "left-the-group"])
def test_stop_does_not_wait_the_whole_grace_for_a_straggler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """With an hour of grace, stop() returns at all only if it did not wait the grace for the
    straggler: once the leader has exited, what is left gets STRAGGLER_GRACE_S. The minute is a
    guard against that hang, not a speed claim (it took a few seconds; the grace is 60 times
    longer)."""
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(tmp_path / "starts.jsonl"))
    fault = "ignore_sigterm_grandchild" + (f"={where}" if where else "")
    server = ServerProcess(fake_launch(faults=fault), tmp_path / "s.log")
    server.start()
    server.wait_healthy(timeout=30)
    holder = started_pids(tmp_path / "starts.jsonl")["holder"]
    assert psutil.pid_exists(holder)
    stopping = threading.Thread(target=server.stop, kwargs={"grace": 3600.0}, daemon=True)
    stopping.start()
    stopping.join(60)
    assert not stopping.is_alive(), "stop() waited the grace for a process that ignores SIGTERM"
    assert not psutil.pid_exists(holder) or psutil.Process(holder).status() == "zombie"
    assert port_is_free(server.launch.host, server.launch.port)


def test_a_foreign_process_on_the_port_fails_that_run_and_is_never_signalled(
    no_leftovers: Path, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuning.engine import launch

    real = launch.free_port
    with foreign_listener() as foreign:
        ports = iter([foreign.port])
        monkeypatch.setattr(launch, "free_port", lambda *a: next(ports, None) or real(*a))
        _, runs = run_faulty(no_leftovers, "")
        assert foreign.untouched()
    bad = runs["4"]
    assert (bad["status"], bad["failure_kind"]) == ("failed", "port_in_use")
    assert (
        f"port {foreign.port}" in bad["failure_reason"]
        and f"pid {foreign.pid}" in (bad["failure_reason"])
    )
    assert bad["server_pid"] is None  # nothing was started
    assert not record.exists() or len(record.read_text().splitlines()) == 1  # only value 2's


def test_a_failed_start_keeps_the_version_the_log_printed(tmp_path: Path) -> None:
    server = ServerProcess(fake_launch(faults="crash_at_start"), tmp_path / "c.log")
    server.start()
    with pytest.raises(StartFailure) as failed:
        server.wait_healthy(timeout=30)
    assert failed.value.vllm_version == "0.32.0+fake"
