"""Issue 13, item 5 end to end on the fake vLLM: a plan over two parameters runs two ordinary
searches, the second with the first's winner in its baseline, then start vs recommended
counterbalanced; it prints the gain with its verdict words and the `vllm serve` command only when
its decision record recommends it (issue 37 item 5), writes an offline report, and a second call
with the same arguments resumes (no run again)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from store import connect, queries
from store.queries import list_plans
from tests.factories import run_row
from tests.fakes.engines import FAKE_MODEL, fake_settings_env
from tuning.compare.stats import VERDICTS
from tuning.decide.search.plan import apply_choice, serve_command
from tuning.experiment.order import counterbalanced
from tuning.measure.traffic.workload import Workload

PLAN = ["plan", "--params", "max-num-seqs,block-size"]
PLAN += ["--param-range", "max-num-seqs=1:4", "--param-range", "block-size=16:32"]
PLAN += ["--coarse", "2", "--budget-runs", "4", "--confirm-repeats", "2"]
PLAN += ["--num-requests", "6", "--concurrency", "3", "--input-len", "8", "--output-len", "4"]
PLAN += ["--num-warmups", "0", "--start-timeout", "240"]


def test_a_plan_over_two_parameters_on_the_fake_engine(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    env = fake_settings_env(lab_home)
    db, report = lab_home / "lab.db", lab_home / "plan.html"
    text = tuning_cli([*PLAN, "--out", str(report)], lab_home, env=env)
    assert text.returncode == 0, text.stdout + text.stderr
    out = text.stdout
    assert "search max-num-seqs 1:4:" in out and "search block-size 16:32:" in out
    assert "gain over the start, output throughput:" in out
    assert any(word in out for word in ("better", "worse", "equivalent", "undecided"))
    decided = f"recommended: vllm serve {FAKE_MODEL} --block-size " in out
    assert decided != ("not recommended: the decision (fixed-n" in out)  # one or the other
    page = report.read_text()
    assert "Content-Security-Policy" in page and ("vllm serve" in page) == decided
    assert 'id="plan-gain"' in page and "http://" not in page and "https://" not in page

    again = tuning_cli([*PLAN, "--json"], lab_home, env=env)  # resumes: every step is stored
    assert again.returncode == 0, again.stderr
    assert "step" not in again.stderr and "confirm round" not in again.stderr
    result = json.loads(again.stdout)
    first, second = result["searches"]
    assert (first["param"], second["param"]) == ("max-num-seqs", "block-size")
    # issue 37 item 4: each search raced its two values (a second run each) and ended with a
    # decided choice or a named tie; that is what the next search starts from
    for s in (first, second):
        assert s["decision"]["outcome"] in ("chosen", "tie") and len(s["runs"]) == 4, s
        assert [r["runs"] for r in s["decision"]["values"]] == [2, 2]
        said = "chosen" if s["decision"]["outcome"] == "chosen" else "tie"
        assert f"search {s['param']} {s['range'][0]:g}:{s['range'][1]:g}: {said}" in out
    assert first["chosen"] in (1, 4) and second["chosen"] in (16, 32)
    assert second["baseline"]["max-num-seqs"] == first["chosen"]  # the winner is the baseline
    assert result["recommended"]["max-num-seqs"] == first["chosen"]
    assert result["recommended"]["block-size"] == second["chosen"]
    assert f"--max-num-seqs {first['chosen']}" in result["serve_command"]
    gain = result["gain"]
    assert gain["metric"] == "output_throughput" and gain["verdict"] in VERDICTS
    decision = result["decision"]  # the plan's record: the fixed-n test over its primaries
    assert decision["rule"] == "fixed-n" and (decision["recommended"] is not None) == decided
    assert gain["verdict"] == decision["values"][0]["metrics"][0]["verdict"]
    assert gain["runs_a_side"] == [2, 2] and gain["ci_low_pct"] is not None
    confirm = result["evidence"]["confirm_runs"]
    with connect(db, readonly=True) as conn:
        runs = {r["id"]: r for r in queries.list_runs(conn, include_hidden=True)}
    assert len(runs) == 12  # 4 + 4 search steps, 2 + 2 confirm runs; nothing ran twice
    assert sorted(confirm["start"] + confirm["final"] + first["runs"] + second["runs"]) == sorted(
        runs
    )
    for rid in second["runs"]:  # the second search ran on the first one's winner
        assert int(runs[rid]["config"]["max-num-seqs"]) == first["chosen"]
    for rid in confirm["start"]:  # the start is the engine's own default (no --set)
        assert "max-num-seqs" not in runs[rid]["config"]
    # counterbalanced (issue 25): start, final, final, start, in the runner's order
    assert sorted(confirm["start"] + confirm["final"]) == [
        confirm[side][index] for side, index in counterbalanced(["start", "final"], 2)
    ]
    # issue 23 item 5: the plan is one row (the resume reused it), each search one of its own
    with connect(db, readonly=True) as conn:
        (plan,) = list_plans(conn)
        searches = queries.list_searches(conn)
    assert result["plan_id"] == plan["id"] and plan["status"] == "done"
    assert plan["key"] == result["plan_key"] and plan["result"]["gain"] == gain
    assert plan["spec"]["params"] == ["max-num-seqs", "block-size"]
    assert sorted(s["id"] for s in searches) == sorted(s["search_id"] for s in result["searches"])
    assert all(s["status"] == "done" for s in searches) and len(searches) == 2


def test_a_plan_is_refused_without_a_range_for_each_parameter(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    env = fake_settings_env(lab_home)
    args = ["plan", "--params", "max-num-seqs,block-size", "--param-range", "max-num-seqs=1:4"]
    done = tuning_cli(args, lab_home, env=env)
    assert done.returncode == 1 and "no range for block-size" in done.stderr
    bad = tuning_cli(
        [*args, "--param-range", "block-size=16:32", "--confirm-repeats", "1"], lab_home
    )
    assert bad.returncode == 1 and "--confirm-repeats must be at least 2" in bad.stderr


def test_choices_go_to_the_config_or_the_workload() -> None:
    wl = Workload(num_requests=8, concurrency=4, input_len=8, output_len=4)
    config, same = apply_choice({"block-size": "32"}, wl, "max-num-seqs", 8)
    assert config == {"block-size": "32", "max-num-seqs": 8} and same == wl
    config, wl2 = apply_choice(config, wl, "concurrency", 16)
    assert wl2.concurrency == 16 and "concurrency" not in config
    assert serve_command(None, config) is None
    row = run_row(1)  # a stored run's config, as the recommendation prints it
    spec = type("E", (), {"model": "m"})()
    assert serve_command(spec, row["config"]) == "vllm serve m --block-size 32 --max-num-seqs 16"  # type: ignore[arg-type]


STARTUP_PLAN = ["plan", "--params", "max-num-seqs", "--param-range", "max-num-seqs=1:4"]
STARTUP_PLAN += ["--coarse", "3", "--budget-runs", "5", "--confirm-repeats", "2"]
STARTUP_PLAN += ["--num-requests", "2", "--concurrency", "1", "--input-len", "4"]
STARTUP_PLAN += ["--output-len", "2", "--num-warmups", "0", "--start-timeout", "240"]
STARTUP_PLAN += ["--objective", "time_to_healthy_s", "--json"]


def test_a_plan_takes_startup_time_as_its_objective(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """Issue 25, item 6: `plan --objective time_to_healthy_s`, lower is better: the value that
    starts 3 s slower (a scripted start delay of the fake engine) is not recommended."""
    env = fake_settings_env(lab_home, faults="start_delay=3@max-num-seqs=1")
    done = tuning_cli(STARTUP_PLAN, lab_home, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    (search,) = result["searches"]
    assert result["objective"] == search["objective"] == "time_to_healthy_s"
    assert search["better"] == "lower"
    slow = [e["time_to_healthy_s"] for e in search["log"] if e["value"] == 1.0]
    fast = [e["time_to_healthy_s"] for e in search["log"] if e["value"] != 1.0]
    assert min(slow) > max(fast) + 2.0, (slow, fast)  # the delay is measured per value
    # the race is between the two quick values (2 and 4); the slow one, tried once, is not
    # chosen, and the choice (or the tie's pick) is what the plan recommends
    assert search["decision"]["outcome"] in ("chosen", "tie") and search["chosen"] in (2, 4)
    assert result["recommended"]["max-num-seqs"] == search["chosen"]
    assert result["gain"]["metric"] == "time_to_healthy_s"
    assert result["gain"]["runs_a_side"] == [2, 2]  # every confirm run started its own server


def test_a_plan_refuses_startup_time_for_a_workload_parameter(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    env = fake_settings_env(lab_home)
    args = ["plan", "--params", "max-num-seqs,concurrency", "--param-range", "max-num-seqs=1:4"]
    args += ["--param-range", "concurrency=1:8", "--objective", "time_to_healthy_s"]
    done = tuning_cli(args, lab_home, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "--objective time_to_healthy_s: concurrency is a workload parameter" in line
    if (lab_home / "lab.db").exists():  # nothing written
        with connect(lab_home / "lab.db", readonly=True) as conn:
            assert not queries.list_experiments(conn, True)
