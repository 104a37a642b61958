"""The fleet end to end on a real Ray cluster on this machine: a head and a second node (`ray
start`, each declaring one slot), an experiment against the fake vLLM through them. Runs land on
both nodes with their placement stored; a worker killed mid-run gives a `worker_lost` run and one
retry on the other node; no server, worker or Ray process is left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import psutil
import pytest

from store import connect, queries, repo
from tests.checks import wait_for, wait_until
from tests.fakes.engines import fake_spec
from tuning.decide.fleet.cluster import FleetOptions, LocalNode, start_node
from tuning.decide.fleet.executor import run_on_fleet
from tuning.decide.fleet.guard import OWNER_ENV, REPORTS_ENV, read_report
from tuning.engine import ipc_dir
from tuning.engine.procs import group_alive
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

pytestmark = [pytest.mark.usefixtures("ray_installed"), pytest.mark.fleet, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def guard_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where every guard of the cluster's workers reports what it has seen (they inherit it)."""
    return tmp_path_factory.mktemp("guards")


@pytest.fixture(scope="module")
def cluster(guard_reports: Path) -> Iterator[list[LocalNode]]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv(REPORTS_ENV, str(guard_reports))
        head = start_node(1, num_cpus=1)
        nodes = [head]
        try:
            nodes.append(start_node(1, head_address=head.address, num_cpus=1))
            yield nodes
        finally:
            for node in reversed(nodes):
                node.stop()
    assert not any(group_alive(node.pgid) for node in nodes)  # every Ray process is gone


def _servers(name: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if name in (proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _describe(name: str) -> list[dict[str, Any]]:
    """What a failure needs to say about the servers left: their parent, owner mark and guard."""
    out = []
    for server in _servers(name):
        try:
            mark = server.environ().get(OWNER_ENV, "")
            owner = int(mark.split(":")[0]) if mark else 0
            guards = [
                p.pid
                for p in psutil.process_iter(["cmdline"])
                if "tuning.decide.fleet.guard" in (p.info["cmdline"] or [])
                and str(owner) in (p.info["cmdline"] or [])
            ]
            out.append(
                {
                    "pid": server.pid,
                    "ppid": server.ppid(),
                    "status": server.status(),
                    "owner": mark,
                    "owner_alive": bool(owner) and psutil.pid_exists(owner),
                    "guards": guards,
                }
            )
        except psutil.Error as exc:
            out.append({"pid": server.pid, "error": repr(exc)})
    return out


def _guard_has_seen(reports: Path, worker: int, server: int) -> bool:
    """The guard of fleet worker `worker` reports that it remembers `server`."""
    return server in read_report(reports / f"guard-{worker}.txt")


def _plan(db: Path, name: str, address: str, faults: str) -> int:
    exp_id = plan_experiment(
        db,
        ExperimentSpec.build(
            param="max-num-seqs",
            values=[2, 4],
            workload=Workload(
                num_requests=4, concurrency=2, input_len=16, output_len=4, num_warmups=0
            ),
            engine=fake_spec(faults, served_name=name),
            repeats=2,
            author="ada",
            host="box-a",
        ),
    )
    with connect(db) as conn:
        fleet = FleetOptions(mode="ray", address=address).to_dict()
        repo.update_experiment(conn, exp_id, fleet_json=fleet)
    return exp_id


def test_runs_spread_over_both_nodes_and_a_lost_worker_is_retried(
    cluster: list[LocalNode], guard_reports: Path, fresh_db: Path
) -> None:
    name = f"fleet-{uuid.uuid4().hex[:8]}"
    exp_id = _plan(fresh_db, name, cluster[0].address, "start_delay=3")
    killed: dict[str, Any] = {}

    def kill_one_worker() -> None:  # the first server's worker, while the server starts
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not killed:
            for server in _servers(name):
                worker = server.parent()
                if worker is not None and "RunWorker" in " ".join(worker.cmdline()):
                    seen = partial(_guard_has_seen, guard_reports, worker.pid, server.pid)
                    if not wait_for(seen, timeout=60):
                        killed["error"] = f"worker {worker.pid}'s guard never reported its server"
                        return
                    folder = ipc_dir.folder_of(server.pid)
                    killed.update(worker=worker.pid, server=server.pid, folder=folder)
                    os.kill(worker.pid, signal.SIGKILL)
                    return
            time.sleep(0.2)  # a poll for the first server, not a guess of how long it takes

    killer = threading.Thread(target=kill_one_worker, daemon=True)
    killer.start()
    run_ids = run_experiment(fresh_db, exp_id, start_timeout=120, executor=run_on_fleet)
    killer.join(5)
    assert killed, "no worker was seen running a server"
    assert "error" not in killed, killed.get("error")
    with connect(fresh_db) as db:
        runs = [queries.get_run(db, i) for i in run_ids]
        exp = queries.get_experiment(db, exp_id)
    summary = [(r["id"], r["status"], r["failure_kind"], r["failure_reason"]) for r in runs]
    assert exp["status"] == "done", (exp["error"], summary)
    lost = [r for r in runs if r["failure_kind"] == "worker_lost"]
    assert len(lost) == 1, [(r["id"], r["status"], r["failure_kind"]) for r in runs]
    retry = [r for r in runs if r["attempt"] == 2]
    assert len(retry) == 1 and retry[0]["status"] == "done"
    assert (retry[0]["seq"], retry[0]["value"]) == (lost[0]["seq"], lost[0]["value"])
    assert retry[0]["node_id"] != lost[0]["node_id"]  # elsewhere
    done = [r for r in runs if r["status"] == "done"]
    assert len(done) == 4 and all(r["completed"] == 4 for r in done)
    assert len({r["node_id"] for r in done}) == 2  # both nodes ran runs
    for r in done:
        placement = r["placement"]
        assert placement["node_id"] == r["node_id"] and r["slot"] and r["cpu_model"]
        assert r["node_host"] and isinstance(r["gpu_uuids"], list)
        assert placement["vllm_port"] and r["kv_cache_tokens"]
    # each run's server log is its own, named by the lab's run uid (concurrent runs' logs
    # once interleaved in one file, so the engine watch read another run's engine pid)
    assert all(r["log_path"].endswith(f"run-{r['uid']}.log") for r in done)
    ports = [json.dumps(r["argv"]) for r in done]
    assert len(set(ports)) == len(ports)  # each run its own port
    wait_until(lambda: not _servers(name), 30, "every server to end with its run")
    assert not psutil.pid_exists(killed["server"]) or not _servers(name)
    # the guard removed the lost server's socket folder with it (tuning.engine.ipc_dir)
    assert killed["folder"] is not None
    wait_until(lambda: not killed["folder"].exists(), 30, "the guard to remove its socket folder")


def test_cancel_stops_every_server_on_the_fleet(cluster: list[LocalNode], fresh_db: Path) -> None:
    name = f"fleet-{uuid.uuid4().hex[:8]}"
    exp_id = _plan(fresh_db, name, cluster[0].address, "start_delay=4")

    def cancel_when_both_start() -> None:
        wait_for(lambda: len(_servers(name)) >= 2, timeout=300, poll=0.2)  # then cancel anyway
        with connect(fresh_db) as db:
            repo.request_cancel(db, exp_id)

    canceller = threading.Thread(target=cancel_when_both_start, daemon=True)
    canceller.start()
    run_ids = run_experiment(fresh_db, exp_id, start_timeout=120, executor=run_on_fleet)
    canceller.join(5)
    with connect(fresh_db) as db:
        runs = [queries.get_run(db, i) for i in run_ids]
        exp = queries.get_experiment(db, exp_id)
    assert exp["status"] == "cancelled"
    assert len(runs) == 2 and all(r["status"] == "cancelled" for r in runs), runs
    wait_until(lambda: not _servers(name), 30, "every server to end with the cancel")


def test_fleet_status_lists_both_nodes_and_their_slots(
    cluster: list[LocalNode], tuning_cli: Any, lab_home: Path
) -> None:
    out = tuning_cli(["fleet", "status", "--json", "--ray-address", cluster[0].address], lab_home)
    assert out.returncode == 0, out.stderr[-2000:]
    status = json.loads(out.stdout)
    assert len(status["nodes"]) == 2 and status["slots_total"] == 2
    assert all(n["alive"] and n["slots"] == 1 for n in status["nodes"])


def test_resume_after_the_driver_is_killed_picks_up_from_the_store(
    cluster: list[LocalNode], fresh_db: Path, tuning_cli: Any, lab_home: Path
) -> None:
    name = f"fleet-{uuid.uuid4().hex[:8]}"
    exp_id = _plan(fresh_db, name, cluster[0].address, "start_delay=3")
    argv = [sys.executable, "-m", "tuning", "run-experiment", "--db", str(fresh_db)]
    driver = subprocess.Popen(
        [*argv, "--experiment", str(exp_id)],
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "TUNING_LAB_HOME": str(lab_home)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )

    def one_stored_others_in_flight() -> bool:
        with connect(fresh_db) as db:
            statuses = {r["status"] for r in queries.list_runs(db, exp_id, include_hidden=True)}
        return driver.poll() is not None or {"done", "running"} <= statuses

    try:  # killed once a run is stored and others are in flight
        wait_until(one_stored_others_in_flight, 300, "a run stored while others are in flight")
        assert driver.poll() is None, "the driver ended before it could be killed"
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait(30)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait(30)
    with connect(fresh_db) as db:
        before = {r["id"]: r for r in queries.list_runs(db, exp_id, include_hidden=True)}
    kept = {i for i, r in before.items() if r["status"] == "done"}
    cut = {i for i, r in before.items() if r["status"] == "running"}
    assert kept and cut
    # Ray ends the dead driver's workers; their guards the servers
    if not wait_for(lambda: not _servers(name), 120):
        pytest.fail(f"120 s after the driver was killed, servers live on: {_describe(name)}")

    out = tuning_cli(["experiment", "--resume", str(exp_id), "--db", str(fresh_db)], lab_home)
    assert out.returncode == 0, out.stderr[-3000:]
    with connect(fresh_db) as db:
        exp = queries.get_experiment(db, exp_id)
        after = {r["id"]: r for r in queries.list_runs(db, exp_id, include_hidden=True)}
    assert exp["status"] == "done", exp["error"]
    assert all(after[i]["status"] == "done" for i in kept)  # kept as they were, not run again
    assert all(after[i]["failure_kind"] == "runner_died" for i in cut)
    done = [r for r in after.values() if r["status"] == "done"]
    assert sorted(r["seq"] for r in done) == [0, 1, 2, 3]  # each pair once, the rest run now
    assert all(r["node_id"] and r["completed"] == 4 for r in done)
    assert not _servers(name)
