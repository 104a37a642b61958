"""Issue 13, item 2: `experiment --repeats auto` adds counterbalanced rounds of the values still
undecided against the baseline until the stopping rule says stop (decided, max repeats, time
budget), from what is stored; a value the engine did not apply is never repeated."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import open_db, queries
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.experiment.order import counterbalanced
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats, plan_for, repeats_lines
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

T0 = "2026-12-03T10:00:00+00:00"


def stored(value: str, tput: float | None, *, seconds: int = 30, **extra: Any) -> dict[str, Any]:
    """A finished run row as queries.list_runs returns it (what plan_for reads)."""
    done = tput is not None
    return {
        "value": value,
        "status": "done" if done else "failed",
        "output_throughput": tput,
        "mean_ttft_ms": 50.0 if done else None,
        "mean_tpot_ms": 10.0 if done else None,
        "p99_ttft_ms": 80.0 if done else None,  # the default guards (tuning.compare.primaries)
        "p99_tpot_ms": 15.0 if done else None,
        "started_at": T0,
        "finished_at": f"2026-12-03T10:00:{seconds:02d}+00:00",
        **extra,
    }


def test_plan_for_reads_the_stored_runs() -> None:
    settings = AutoRepeats(max_repeats=6)
    # nothing stored yet: the first two rounds of both values
    first = plan_for([2, 16], [], settings)
    assert first.rounds == 2 and first.pending == ("16",)
    # a cancelled run does not count as tried; runs of other values are ignored
    runs = [
        stored("2", 100.0),
        stored("16", 100.0),
        stored("2", 130.0),
        stored("16", 70.0),
        {**stored("16", 5.0), "status": "cancelled"},
        stored("99", 1.0),
    ]
    plan = plan_for([2, 16], runs, settings)
    assert not plan.stop and plan.pending == ("16",) and plan.values["16"].attempts == 2


def test_plan_for_stops_on_the_budget_and_on_values_not_applied() -> None:
    runs = [stored("2", 100.0), stored("16", 100.0), stored("2", 130.0), stored("16", 70.0)]
    spent = plan_for([2, 16], runs, AutoRepeats(budget_minutes=2.0))  # 4 runs x 30 s = 2 min
    assert spent.stop and spent.reason.startswith("the time budget is spent: one more round")
    ignored = [
        {**r, "config_mismatch": ["max-num-seqs"]} if r["value"] == "16" else r for r in runs
    ]
    plan = plan_for([2, 16], ignored, AutoRepeats())
    assert plan.stop and plan.pending == () and "did not apply" in plan.reason
    base_ignored = [{**r, "config_mismatch": ["x"]} for r in runs]
    assert "baseline" in plan_for([2, 16], base_ignored, AutoRepeats()).reason


def test_settings_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        AutoRepeats(max_repeats=1)
    with pytest.raises(ValueError):
        AutoRepeats(budget_minutes=0)
    assert AutoRepeats.of({"repeats_auto": 0}) is None
    assert AutoRepeats.of({"repeats_auto": 1, "max_repeats": 4}) == AutoRepeats(max_repeats=4)


def _auto_experiment(db_path: Path, base_url: str, auto: AutoRepeats) -> int:
    wl = Workload(num_requests=4, concurrency=1, input_len=4, output_len=3, num_warmups=0)
    return plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="concurrency",
            values=[1, 3],
            workload=wl,
            engine=None,
            base_url=base_url,
            model="m",
            auto=auto,
        ),
    )


def test_auto_repeats_add_counterbalanced_rounds_until_the_rule_stops(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    events: list[dict[str, Any]] = []
    done: list[tuple[int, int]] = []

    def progress(event: str, data: dict[str, Any]) -> None:
        if event == "repeats":
            events.append(data)
        elif event == "run_done":
            done.append((int(data["done"]), int(data["total"])))

    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=5.0, itl_ms=5.0)) as srv:
        exp_id = _auto_experiment(db_path, srv.base_url, AutoRepeats(max_repeats=3))
        ids = run_experiment(db_path, exp_id, progress)
    db = open_db(db_path)
    exp = queries.get_experiment(db, exp_id)
    runs = queries.list_runs(db, exp_id)
    assert exp["status"] == "done" and exp["repeats_auto"] == 1 and exp["max_repeats"] == 3
    assert [r["id"] for r in runs] == ids and 4 <= len(runs) <= 6
    # counterbalanced (issue 25): A B B A, and the added rounds go on with the same order
    assert [r["value"] for r in runs] == [v for v, _ in counterbalanced(["1", "3"], 3)][: len(runs)]
    for value in ("1", "3"):
        assert [r["repeat_index"] for r in runs if r["value"] == value] == list(
            range(sum(r["value"] == value for r in runs))
        )
    plan = exp["repeats_plan"]
    assert plan["stop"] and events and events[-1]["stop"]
    assert plan["values"]["3"]["state"] in ("decided", "capped", "futile")
    # a value still undecided at the end carries its repeat estimate (the fake's timing on a
    # busy machine is too noisy to say which verdict: the mechanics are what is tested here)
    three = plan["values"]["3"]
    assert three["state"] == "decided" or three["more"]
    assert exp["runs_total"] == len(runs)
    # progress counts every run once: 1, 2, ... len(runs), never past its total
    assert [d for d, _ in done] == list(range(1, len(runs) + 1))
    assert all(d <= t for d, t in done)
    assert any("3: " in line for line in repeats_lines(plan))


def test_cli_refuses_limits_without_auto_and_a_word_for_repeats(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db = lab_home / "lab.db"
    base = [
        "experiment",
        "--repeats",
        "1",
        "--param",
        "concurrency",
        "--values",
        "1,3",
        "--db",
        str(db),
    ]
    bad = tuning_cli([*base, "--base-url", "http://127.0.0.1:9", "--max-repeats", "4"], lab_home)
    assert bad.returncode != 0 and "need --repeats auto" in bad.stderr
    word = tuning_cli([*base, "--repeats", "lots"], lab_home)
    assert word.returncode != 0 and "a number of runs or 'auto'" in word.stderr


def test_an_experiment_stopped_on_its_budget_goes_on_under_a_larger_one(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """`experiment --resume ID --budget-minutes M`: an H100 run's 11-minute budget ran out one run
    a side short of a verdict (examples/h200/cudagraph-h100-*); before, resume said "nothing to
    resume, every run has finished" and the only way on was a new experiment from zero."""
    db_path = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=5.0, itl_ms=5.0)) as srv:
        exp_id = _auto_experiment(db_path, srv.base_url, AutoRepeats(3, budget_minutes=0.01))
        run_experiment(db_path, exp_id)
        db = open_db(db_path)
        first = queries.list_runs(db, exp_id)
        # the stored numbers of an undecided pair (the fake's own are decided or not by chance)
        for run, tput in zip(first, (100.0, 100.0, 130.0, 70.0), strict=True):
            db.table("runs").update(run["id"], {"output_throughput": tput})
        base = ["experiment", "--resume", str(exp_id), "--db", str(db_path)]
        fixed = tuning_cli([*base, "--budget-minutes", "0"], lab_home)
        assert fixed.returncode == 1 and "--budget-minutes must be more than 0" in fixed.stderr
        again = tuning_cli([*base, "--budget-minutes", "30"], lab_home)
    assert again.returncode == 0, again.stderr
    exp = queries.get_experiment(db, exp_id)
    runs = queries.list_runs(db, exp_id)
    assert len(first) == 4 and exp["budget_minutes"] == 30 and exp["max_repeats"] == 3
    assert [r["value"] for r in runs] == [v for v, _ in counterbalanced(["1", "3"], 3)]
    assert exp["status"] == "done" and exp["repeats_plan"]["stop"]


def test_resume_with_limits_takes_a_fixed_repeats_experiment_on_until_decided(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """Issue 37 item 5: an experiment of fixed repeats left undecided offers more runs; `--resume
    ID --max-repeats N` (what its record's next step prints) goes on with it until decided,
    where it used to be refused, and its decision becomes the sequential rule's."""
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=2, concurrency=1, input_len=4, output_len=3, num_warmups=0)
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=5.0, itl_ms=5.0)) as srv:
        exp_id = plan_experiment(
            db_path,
            ExperimentSpec.build(
                param="concurrency",
                values=[1, 2],
                workload=wl,
                engine=None,
                base_url=srv.base_url,
                model="m",
            ),
        )
        run_experiment(db_path, exp_id)
        first = queries.get_experiment(open_db(db_path), exp_id)
        assert first["decision"]["rule"] == "fixed-n"  # stored by the runner as it ended
        assert first["decision"]["values"][0]["outcome"] == "undecided"  # one run a side
        args = ["experiment", "--resume", str(exp_id), "--max-repeats", "3", "--db", str(db_path)]
        done = tuning_cli(args, lab_home)
    assert done.returncode == 0, done.stderr
    exp = queries.get_experiment(open_db(db_path), exp_id)
    assert exp["status"] == "done" and exp["repeats_auto"] == 1 and exp["max_repeats"] == 3
    assert len(queries.list_runs(open_db(db_path), exp_id)) > 2  # more rounds ran
    assert exp["decision"]["rule"] == "sequential"
