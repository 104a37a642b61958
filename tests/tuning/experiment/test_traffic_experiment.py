"""Experiments on real traffic with the fake vLLM: a workload knob (request rate) as the one
variable with the server kept up, the spec stored with the experiment and its runs, per-request
turn and dispatch lag, the traffic summary, comparability by the plan's fingerprint; the knobs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect, queries
from tuning.compare.comparability import check_pair
from tuning.experiment.planned import apply_value, mirrored, with_knob
from tuning.measure.traffic import Arrival, LengthDist, Source, TrafficError, WorkloadSpec
from tuning.measure.traffic.workload import Workload

SMALL = ["--num-requests", "8", "--input-len", "16", "--output-len", "4", "--num-warmups", "1"]
SMALL += ["--start-timeout", "240", "--json"]


@pytest.fixture(scope="module")
def tuning(fake_cli: Callable[..., CompletedProcess[str]]) -> Callable[..., CompletedProcess[str]]:
    """`python -m tuning ARGS` with the fake engine, `home` as the lab."""
    return lambda home, *args: fake_cli(home, *args, timeout=240)


@pytest.fixture(scope="module")
def rate_sweep(
    tmp_path_factory: pytest.TempPathFactory, tuning: Callable[..., CompletedProcess[str]]
) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("traffic")
    done = tuning(
        home,
        "experiment",
        "--repeats",
        "1",
        "--param",
        "request-rate",
        "--values",
        "20,40",
        "--max-concurrency",
        "3",
        "--multi-turn",
        "2",
        *SMALL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with connect(home / "lab.db", readonly=True) as db:
        exp = queries.get_experiment(db, 1)
        runs = queries.list_runs(db, 1, include_hidden=True)
        requests = {r["id"]: queries.get_requests(db, r["id"]) for r in runs}
    return {"home": home, "exp": exp, "runs": runs, "requests": requests}


def test_a_rate_sweep_keeps_the_server_up_and_stores_the_spec(rate_sweep: dict[str, Any]) -> None:
    exp, runs = rate_sweep["exp"], rate_sweep["runs"]
    assert exp["workload_spec"]["arrival"]["kind"] == "open"
    assert [r["status"] for r in runs] == ["done", "done"]
    assert [r["workload_spec"]["arrival"]["rate"] for r in runs] == [20.0, 40.0]
    assert [r["workload"]["request_rate"] for r in runs] == [20.0, 40.0]
    startups = [r["startup"] for r in runs]
    assert [s["reused_server"] for s in startups] == [False, True]  # one start for both values
    for r in runs:
        assert r["completed"] == 8 and r["failed"] == 0


def test_each_request_has_its_turn_and_dispatch_lag(rate_sweep: dict[str, Any]) -> None:
    for recs in rate_sweep["requests"].values():
        assert [r.turn for r in recs] == [0, 1] * 4
        assert [r.conversation for r in recs] == [0, 0, 1, 1, 2, 2, 3, 3]
        assert all(r.dispatch_lag is not None for r in recs)


def test_the_traffic_summary_says_target_and_turns(rate_sweep: dict[str, Any]) -> None:
    for run, target in zip(rate_sweep["runs"], (20.0, 40.0), strict=True):
        traffic = run["summary"]["traffic"]
        assert traffic["arrival"] == "open" and traffic["target_request_rate"] == target
        assert traffic["requests_first_turn"] == 4 and traffic["requests_later_turns"] == 4
        assert traffic["dispatch_lag"]["planned"] == 8
        # Never faster than planned (offsets are normalized to n / rate).
        assert traffic["achieved_request_rate"] <= target * 1.05


def test_runs_of_a_knob_sweep_are_comparable_by_that_knob(rate_sweep: dict[str, Any]) -> None:
    a, b = rate_sweep["runs"]
    assert a["workload_fingerprint"] != b["workload_fingerprint"]  # the plan's schedule differs
    check = check_pair(a, b)
    assert check.comparable and set(check.changed) == {"request-rate"}


def test_a_saved_workload_by_name_and_a_dataset(
    tmp_path: Path, tuning: Callable[..., CompletedProcess[str]]
) -> None:
    home = tmp_path / "lab"
    spec = WorkloadSpec(
        input=LengthDist("uniform", 12, range_ratio=0.5),
        output=LengthDist(mean=3),
        num_requests=6,
        arrival=Arrival("closed", concurrency=2),
    )
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_dict()))
    saved = tuning(home, "workload", "save", "tiny", "--spec", str(path))
    assert saved.returncode == 0 and "'tiny' saved" in saved.stdout, saved.stderr
    listed = tuning(home, "workload", "list")
    assert listed.stdout.startswith("tiny")
    done = tuning(
        home,
        "experiment",
        "--repeats",
        "1",
        "--param",
        "concurrency",
        "--values",
        "1,3",
        "--workload",
        "tiny",
        "--num-warmups",
        "0",
        "--start-timeout",
        "60",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with connect(home / "lab.db", readonly=True) as db:
        runs = queries.list_runs(db, 1, include_hidden=True)
    assert [r["workload_spec"]["arrival"]["concurrency"] for r in runs] == [1, 3]
    assert [r["completed"] for r in runs] == [6, 6]
    bad = tuning(
        home,
        "experiment",
        "--repeats",
        "1",
        "--param",
        "concurrency",
        "--values",
        "2",
        "--workload",
        "no",
    )
    assert bad.returncode == 1 and "neither a spec file nor a saved workload" in bad.stderr


def test_knobs_change_the_spec_and_refuse_what_it_lacks() -> None:
    closed = WorkloadSpec()
    assert with_knob(closed, "concurrency", 8).arrival.concurrency == 8
    assert with_knob(closed, "input-len", 300).input == LengthDist(mean=300)
    with pytest.raises(TrafficError, match="open-loop"):
        with_knob(closed, "request-rate", 5)
    opened = WorkloadSpec(arrival=Arrival("open", rate=2.0, max_concurrency=4))
    assert with_knob(opened, "concurrency", 9).arrival.max_concurrency == 9
    assert with_knob(opened, "burstiness", 0.5).arrival.burstiness == 0.5
    trace = WorkloadSpec(
        source=Source("trace", "mooncake-small.jsonl"),
        input=None,
        output=None,
        arrival=Arrival("trace"),
    )
    with pytest.raises(TrafficError, match="synthetic length"):
        with_knob(trace, "output-len", 10)
    wl = Workload(num_requests=4, concurrency=2, input_len=8, output_len=4)
    wl2, spec2 = apply_value(wl, opened, "request-rate", 7.5)
    assert wl2 == wl and spec2 is not None and mirrored(wl2, spec2)["request_rate"] == 7.5
    with pytest.raises(ValueError):
        apply_value(wl, None, "request-rate", 7.5)  # the classic workload has no rate


def test_an_open_loop_is_judged_by_its_schedule(rate_sweep: dict[str, Any]) -> None:
    for run in rate_sweep["runs"]:
        reasons = run["health"]["client_bound_reasons"]
        assert not any(r.startswith("never held") for r in reasons), reasons


def test_a_schedule_not_kept_is_the_client_bound_reason(tiny_tokenizer: Path) -> None:
    from core.records import RequestRecord
    from tuning.experiment.planned import judge_traffic
    from tuning.measure.traffic import materialize
    from tuning.measure.traffic.workload import LocalTokenizer

    spec = WorkloadSpec(num_requests=4, arrival=Arrival("open", rate=10.0, max_concurrency=1))
    plan = materialize(spec, LocalTokenizer(tiny_tokenizer))
    recs = [
        RequestRecord(index=i, start=0.1 * i, ttft=0.01, ok=True, turn=0, dispatch_lag=0.2 * i)
        for i in range(4)
    ]
    health: dict[str, Any] = {"client_bound_reasons": ["never held 1 of 1 requests in flight"]}
    traffic = judge_traffic(health, recs, plan, 1.0)
    assert not traffic["schedule_kept"] and health["client_bound"]
    assert [r.split(":")[0] for r in health["client_bound_reasons"]] == [
        "the schedule was not kept"
    ]
    kept = [
        RequestRecord(index=i, start=0.1 * i, ok=True, turn=0, dispatch_lag=0.001) for i in range(4)
    ]
    health = {"client_bound_reasons": ["never held 1 of 1 requests in flight"]}
    assert judge_traffic(health, kept, plan, 1.0)["schedule_kept"] and not health["client_bound"]
