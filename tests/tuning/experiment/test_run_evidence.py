"""Every run's evidence is its own (issue 22): two databases under one lab home (the lab's advice
after a damaged DB is to move it aside; any `--db` does the same) once shared server logs named
`logs/experiment-<id>/run-<id>.log`, appended to, with the engine's pids and KV size read from the
first match. The second DB's 2G run stored the first DB's 1G KV size (524,288 tokens) and
`failed` with the first run's dead EngineCore pid."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import connect, queries, repo
from tests.fakes.engines import fake_launch, fake_spec
from tuning.engine.server import ServerProcess
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

QUICK = Workload(num_requests=4, concurrency=2, input_len=8, output_len=4, num_warmups=0)
TOKENS_PER_GIB = 2**30 // 2048  # the fake sizes its KV cache at the tiny model's 2,048 B a token


def _one_run(db_path: Path, kv_bytes: str) -> dict[str, object]:
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="kv-cache-memory-bytes", values=[kv_bytes], workload=QUICK, engine=fake_spec()
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=60)
    with connect(db_path, readonly=True) as db:
        (run,) = queries.list_runs(db, exp_id, include_hidden=True)
    return run


def test_two_databases_under_one_home_keep_their_own_server_facts(no_leftovers: Path) -> None:
    first = _one_run(no_leftovers / "lab.db", "1G")
    second = _one_run(no_leftovers / "moved-aside" / "lab.db", "2G")  # experiment 1, run 1 again
    for run, gib in ((first, 1), (second, 2)):
        assert run["status"] == "done", (run["failure_kind"], run["failure_reason"])
        assert run["kv_cache_tokens"] == gib * TOKENS_PER_GIB
    assert first["log_path"] != second["log_path"]
    for run in (first, second):
        log = Path(str(run["log_path"]))
        assert log.name == f"run-{run['uid']}.log"
        assert log.read_text().count("vLLM server version") == 1  # one launch, its own


def test_a_launch_never_appends_to_an_old_log(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text("(EngineCore pid=1) INFO GPU KV cache size: 1 tokens\n")  # a stale file
    with ServerProcess(fake_launch({"max-num-seqs": 2}), log) as server:
        facts = server.wait_healthy(60)
    assert "pid=1)" not in log.read_text()
    assert facts.kv_cache_tokens != 1 and facts.engine_pids.get("EngineCore") != 1


def test_a_fleet_experiment_never_runs_here_by_default(fresh_db: Path) -> None:
    """The executor is the caller's choice; a fleet experiment handed no fleet executor is refused
    before anything runs (run on this machine it would be another experiment than planned)."""
    exp_id = plan_experiment(
        fresh_db,
        ExperimentSpec.build(param="max-num-seqs", values=[2], workload=QUICK, engine=fake_spec()),
    )
    with connect(fresh_db) as db:
        repo.update_experiment(db, exp_id, fleet_json={"mode": "local", "slots": 1})
    with pytest.raises(ValueError, match="runs on the fleet"):
        run_experiment(fresh_db, exp_id)
    with connect(fresh_db, readonly=True) as db:
        assert queries.list_runs(db, exp_id, include_hidden=True) == []
