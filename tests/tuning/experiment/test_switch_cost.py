"""Issue 38, items 4 and 7: the estimate before an experiment and the until-decided budget count a
switch, not a restart, for the runs whose repeats switch resident servers: the machine's measured
switch seconds where it has resident runs (on the fake vLLM as a CUDA engine with sleep mode),
else the known cost (0.13 s), said as such. Before, every run was counted a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from core.records import NewExperiment
from store import connect, queries, repo
from tests.fakes.engines import fake_spec
from tuning.experiment.estimate import (
    costs_from,
    experiment_line,
    for_experiment,
    of_experiment,
    with_switches,
)
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats, plan_for
from tuning.experiment.run_parts import Parts
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.experiment.switch_cost import (
    PAUSE_GUESS_S,
    SWITCH_GUESS_S,
    spec_experiment,
    switches_in,
    will_switch,
)
from tuning.measure.traffic.workload import Workload

WL = Workload(num_requests=40, concurrency=4, input_len=8, output_len=10, num_warmups=0)
GPU = {
    "name": "custom",
    "command": ["python", "fake_vllm.py"],
    "model": "m",
    "served_model_name": "m",
    "backend": "gpu",
}


def test_which_repeats_switch_follows_the_runner() -> None:
    # each value restarts at repeat 0, 3, 6, ...: 3 repeats of 2 values switch 4 times
    assert switches_in(6, 2, 3) == 4
    assert switches_in(8, 2, 3) == 4  # repeats 0 and 3 restart
    assert switches_in(2, 2, 3) == 0  # one run a value: nothing to switch
    assert switches_in(7, 2, 3) == 4  # the 7th run is the first value's 4th repeat: a restart
    assert switches_in(6, 2, 0) == 0  # every run restarts


def _costs(switch_every: int = 0) -> Any:
    from dataclasses import replace

    rows = [{"time_to_healthy_s": 50.0, "duration": 10.0, "started_at": None}]
    costs = costs_from(rows, [], WL, "custom")
    return replace(costs, switch_every=switch_every, rest_s=2.0, experiment_s=5.0)


def test_an_estimate_counts_a_switch_for_the_runs_that_switch() -> None:
    restarting, resident = _costs(), _costs(3)
    load = restarting.load_s
    assert for_experiment(restarting, 2, 3).seconds == pytest.approx(5 + 6 * (50 + load + 2))
    est = for_experiment(resident, 2, 3)
    # 2 starts, 4 switches at the known 0.13 s
    assert est.seconds == pytest.approx(5 + 2 * 50 + 4 * SWITCH_GUESS_S + 6 * (load + 2))
    line = est.line()
    assert "a switch 0.13 s (a switch's known cost: 0.12-0.13 s" in line
    assert "4 of them switch resident servers instead of restarting" in line
    # the budget's mean run: a third of the runs start, two thirds switch
    assert resident.run_s() == pytest.approx(50 / 3 + 2 * SWITCH_GUESS_S / 3 + load + 2)


def test_the_budget_affords_the_rounds_switching_makes_room_for() -> None:
    def run(value: str, t: float, tput: float, mode: str | None) -> dict[str, Any]:
        return {
            "status": "done",
            "value": value,
            "time_to_healthy_s": None if mode == "switch" else 50.0,
            "duration": 10.0,
            "total_output_tokens": 400,
            "output_throughput": tput,
            "startup": {"resident": mode} if mode else {},
        }

    runs = [run("2", 0, 100.0, "start"), run("16", 1, 100.0, "start")]
    runs += [run("2", 2, 130.0, "switch"), run("16", 3, 70.0, "switch")]
    settings = AutoRepeats(budget_minutes=2.0)
    restarting = plan_for([2, 16], runs, settings, _costs())
    resident = plan_for([2, 16], runs, settings, _costs(3))
    # 120 s - 5 s: 115 s left (these runs carry no times); a round of two runs costs 2 x 62 s
    # when each restarts, 2 x about 28.8 s when two thirds of them switch
    assert restarting.stop and restarting.reason.startswith("the time budget is spent")
    assert not resident.stop and resident.rounds == 1, resident.reason


def test_the_budget_prices_the_next_rounds_by_whether_they_switch() -> None:
    """The H100's third try (2026-12-07): after two rounds, 60 s of a 5-minute budget left, the
    mean run (a third starting) priced the next round at 2 min and the experiment stopped
    undecided, though that round's runs (repeat 2) would only switch."""

    def run(value: str, tput: float, mode: str) -> dict[str, Any]:
        started = mode == "start"
        return {
            "status": "done",
            "value": value,
            "time_to_healthy_s": 50.0 if started else None,
            "duration": 10.0,
            "total_output_tokens": 400,
            "output_throughput": tput,
            "startup": {"resident": mode},
        }

    two = [run("2", 100.0, "start"), run("16", 100.0, "start")]
    two += [run("2", 130.0, "switch"), run("16", 70.0, "switch")]
    # with these runs' 10 s of load: a round of two switches about 2 x 12.1 s, of two starts
    # 2 x 62 s, and of two mean runs (a third starting) 2 x 28.8 s
    costs = _costs(3)
    settings = AutoRepeats(budget_minutes=0.75, max_repeats=6)  # 45 s - 5 s: 40 s left
    plan = plan_for([2, 16], two, settings, costs)
    assert not plan.stop and plan.rounds == 1, plan.reason
    # the round after it is a real restart (repeat 3): a start each, which 40 s do not afford
    three = two + [run("2", 120.0, "switch"), run("16", 80.0, "switch")]
    after = plan_for([2, 16], three, settings, costs)
    assert after.stop and after.reason.startswith("the time budget is spent"), after.reason


def test_switched_runs_measure_their_switch_apart_from_the_rest() -> None:
    anatomy = {"parts": [{"key": "switch", "seconds": 0.2}, {"key": "load", "seconds": 10.0}]}
    switched = {"duration": 10.0, "startup": {"resident": "switch"}, "anatomy": anatomy}
    parts = Parts.of([{**switched, "anatomy_wall_s": 12.2}])
    assert parts.switches == [0.2] and parts.rests == [pytest.approx(2.0)]


def _exp(path: Path, **columns: Any) -> int:
    with connect(path) as db:
        return repo.create_experiment(
            db,
            NewExperiment(param=columns.pop("param", "max-num-seqs")),
            uid=repo.new_uid(),
            values_json=[2, 16],
            repeats=columns.pop("repeats", 3),
            engine_json=columns.pop("engine_json", GPU),
            workload_json=WL.to_dict(),
            **columns,
        )


def test_whether_an_experiment_will_switch(fresh_db: Path) -> None:
    used = {"asked": "auto", "used": True}
    fell = {**used, "fallback": "sleep mode failed"}
    cases = {
        _exp(fresh_db, resident_json=used): True,  # the runner decided: it switches
        _exp(fresh_db, resident_json=fell): False,  # ... and fell back: it restarts now
        _exp(fresh_db, resident_json={"asked": "off"}): False,
        _exp(fresh_db, repeats=1): False,  # one run a value
        _exp(fresh_db, param="max-model-len"): False,  # a flag that sizes memory
        _exp(fresh_db): False,  # this vLLM's flags never read here: taken to restart
        # ... unless its version has sleep mode, as the runner takes it (the H100's first
        # resident experiment printed "a budget of 5 min allows about 2 runs" and ran 6)
        _exp(fresh_db, engine_json={**GPU, "vllm_version": "0.25.0"}): True,
        _exp(fresh_db, engine_json={**GPU, "vllm_version": "0.7.3"}): False,
    }
    with connect(fresh_db, readonly=True) as db:
        got = {i: will_switch(db, queries.get_experiment(db, i)) for i in cases}
        line = experiment_line(db, next(iter(cases))).line()
    assert got == cases
    assert "4 of them switch resident servers" in line


# -- on the fake vLLM as a CUDA engine with sleep mode --------------------------------------------
QUICK = Workload(num_requests=16, concurrency=2, input_len=8, output_len=8, num_warmups=1)
KV = {"kv-cache-memory-bytes": 64 * 2**20}


def test_the_next_estimate_uses_the_switches_this_machine_measured(sleepy: Path) -> None:
    db_path = sleepy / "lab.db"

    def build(resident: str) -> ExperimentSpec:
        return ExperimentSpec.build(
            param="max-num-seqs",
            values=[2, 16],
            repeats=3,
            workload=QUICK,
            engine=fake_spec("ttft_ms=20,itl_ms=2"),
            base_config=KV,
            resident=resident,
        )

    def plan(resident: str) -> int:
        return plan_experiment(db_path, build(resident))

    first = plan("auto")
    run_experiment(db_path, first, start_timeout=60)
    again, off = plan("auto"), plan("off")
    with connect(db_path, readonly=True) as db:
        runs = queries.list_runs(db, first, include_hidden=True)
        switched = [
            sum(p["seconds"] for p in r["anatomy"]["parts"] if p["key"] == "switch")
            for r in runs
            if r["startup"].get("resident") == "switch"
        ]
        assert len(switched) == 4, [r["startup"].get("resident") for r in runs]
        est = of_experiment(db, queries.get_experiment(db, again))
        est_off = of_experiment(db, queries.get_experiment(db, off))
        # New experiment's estimate, before anything is stored, counts the same switches
        before = with_switches(db, spec_experiment(build("auto")), est_off.costs)
    costs = est.costs
    assert costs.switch_s == pytest.approx(sum(switched) / 4, abs=1e-3)  # measured here
    assert "measured here" in est.line() and "4 of them switch" in est.line()
    whole = costs.experiment_s + 6 * (costs.load_s + costs.rest_s)
    assert est.seconds == pytest.approx(whole + 2 * costs.start_s + 4 * costs.switch_cost())
    assert est_off.costs.switch_every == 0 and est_off.seconds > est.seconds
    assert before.switch_every == 3


def test_a_cpu_vllm_switches_by_pausing_at_a_stated_guess(fresh_db: Path) -> None:
    """A CPU vLLM has no sleep mode but its servers are paused (tuning.engine.pause): its repeats
    switch without its flags read, and until it measured a switch the estimate counts the
    pause's stated guess (0.05 s), said as not measured, not the H100's sleep / wake."""
    cpu = {**GPU, "backend": "cpu"}
    resident, sized = (
        _exp(fresh_db, engine_json=cpu),
        _exp(fresh_db, engine_json=cpu, param="block-size"),
    )
    with connect(fresh_db, readonly=True) as db:
        assert will_switch(db, queries.get_experiment(db, resident))
        assert not will_switch(db, queries.get_experiment(db, sized))  # it sizes memory
        costs = with_switches(db, queries.get_experiment(db, resident), _costs())
        line = experiment_line(db, resident).line()
    assert costs.switch_every == 3 and costs.switch_cost() == PAUSE_GUESS_S
    est = for_experiment(costs, 2, 3)
    assert est.seconds == pytest.approx(5 + 2 * 50 + 4 * PAUSE_GUESS_S + 6 * (costs.load_s + 2))
    assert "a switch 0.05 s (a guess for a CPU vLLM, not measured here yet" in line
