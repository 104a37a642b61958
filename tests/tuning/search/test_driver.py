"""Issue 13, item 4 end to end against a fake server (attached, so concurrency is the searched
parameter and nothing restarts): every step is an ordinary run in the store with the reason it
was chosen, the JSON names the chosen value, its runs and the log, and a second call with the
same arguments resumes instead of starting over."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

from store import connect, queries
from tests.fakes.engines import fake_settings_env
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer


def test_search_runs_steps_and_resumes(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m", ttft_ms=2.0, itl_ms=5.0)) as srv:
        args = ["search", "--base-url", srv.base_url, "--model", "m", "--param", "concurrency"]
        args += ["--range", "1:4", "--objective", "output_throughput", "--coarse", "2"]
        args += ["--num-requests", "4", "--input-len", "4", "--output-len", "3"]
        args += ["--num-warmups", "0", "--db", str(db), "--json"]
        first = tuning_cli([*args, "--budget-runs", "2"], lab_home)
        assert first.returncode == 0, first.stderr
        done = json.loads(first.stdout)
        assert [e["value"] for e in done["log"]] == [1.0, 4.0]
        assert done["log"][0]["why"].startswith("coarse pass") and "budget" in done["stopped"]
        assert done["chosen"] in (1, 4) and done["interval"] is None
        assert done["start_limit"] is None  # every value started
        # the same search with a larger budget resumes: the two runs are not run again
        again = tuning_cli([*args, "--budget-runs", "3"], lab_home)
    assert again.returncode == 0, again.stderr
    more = json.loads(again.stdout)
    assert more["runs"][:2] == done["runs"] and len(more["runs"]) == 3
    assert more["log"][2]["why"].startswith("refine")
    with connect(db, readonly=True) as conn:
        runs = queries.list_runs(conn, include_hidden=True)
        assert sorted(r["id"] for r in runs) == sorted(more["runs"])
        assert all(r["status"] == "done" for r in runs)
    bad = tuning_cli([*args, "--objective", "nope"], lab_home)
    assert bad.returncode == 2 and "refused: objective 'nope'" in bad.stderr


def test_search_takes_startup_time_as_its_objective(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """Issue 25, item 6: `search --objective time_to_healthy_s` (lower is better) on the fake
    engine, whose start is scripted 3 s slower at one value: the other value is chosen."""
    env = fake_settings_env(lab_home, faults="start_delay=3@max-num-seqs=1")
    args = ["search", "--param", "max-num-seqs", "--range", "1:4", "--coarse", "2"]
    args += ["--budget-runs", "2", "--objective", "time_to_healthy_s", "--num-requests", "2"]
    args += ["--concurrency", "1", "--input-len", "4", "--output-len", "2", "--num-warmups", "0"]
    args += ["--start-timeout", "240", "--json"]
    done = tuning_cli(args, lab_home, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["objective"] == "time_to_healthy_s" and result["better"] == "lower"
    seconds = {e["value"]: e["time_to_healthy_s"] for e in result["log"]}
    assert seconds[1.0] > seconds[4.0] + 2.0, seconds
    assert result["chosen"] == 4 and result["chosen_objective"] == seconds[4.0]


def test_search_refuses_startup_time_where_nothing_starts(
    lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """An attached server is never started, and a workload knob runs on one server: no start to
    time. One line, exit 2, nothing written."""
    db = lab_home / "lab.db"
    common = ["--range", "1:4", "--objective", "time_to_healthy_s", "--db", str(db)]
    attached = ["search", "--param", "concurrency", "--base-url", "http://127.0.0.1:9/v1"]
    done = tuning_cli([*attached, "--model", "m", *common], lab_home)
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "--objective time_to_healthy_s: an attached server (--base-url)" in line
    knob = ["search", "--param", "concurrency", *common]
    done = tuning_cli(knob, lab_home, env=fake_settings_env(lab_home))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "concurrency is a workload parameter, run on one server without a restart" in line
    if db.exists():  # nothing written
        with connect(db, readonly=True) as conn:
            assert not queries.list_experiments(conn, True)
