"""The next run's server spawned ahead (issue 38 item 3, tuning.experiment.prelaunching), on the
fake vLLM run as `python -m` with slow imports: it is spawned once the last run's load is over,
imports while that run's server stops, and goes only once that server's group and port are gone;
its time to healthy includes its imports, the run's anatomy adds up and names what was hidden.
Off, or with a command the launcher cannot wrap, runs start as before; on Stop the server spawned
ahead is stopped; an import that fails in it is its run's failed start, in the log's words."""

from __future__ import annotations

import dataclasses
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from store import connect, queries
from tests.fakes.engines import (
    FAKE_VLLM,
    ForeignProcess,
    fake_command,
    fake_spec,
    foreign_listener,
)
from tuning.engine.prelaunch import PrelaunchedServer
from tuning.engine.procs import group_members
from tuning.engine.server import ServerProcess, port_is_free
from tuning.engine.spec import EngineSpec
from tuning.experiment import time_spent
from tuning.experiment.plan import plan_experiment
from tuning.experiment.run_anatomy import adds_up
from tuning.experiment.run_unit import RunUnit
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

WL = Workload(num_requests=6, concurrency=2, input_len=8, output_len=8, num_warmups=2)
IMPORT_S = 1.5
STOP_S = 2.5


def module_spec() -> EngineSpec:
    return dataclasses.replace(fake_spec(), command=fake_command(module=True))


def run_two(lab_home: Path, spec: EngineSpec) -> tuple[str, list[dict[str, Any]]]:
    db_path = lab_home / "lab.db"
    exp_id = plan_experiment(
        db_path,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4, 2], repeats=1, workload=WL, engine=spec
        ),
    )
    run_experiment(db_path, exp_id, start_timeout=60)
    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    return str(exp["status"]), runs


class Seen:
    """Every server the lab made, when each was spawned, let go and stopped for good."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.servers: list[ServerProcess] = []
        self.spawned: dict[int, float] = {}
        self.stopped: dict[int, float] = {}
        self.went: dict[int, float] = {}
        self.met: list[str] = []  # an earlier server (group or port) still there at a go
        real_start, real_stop = ServerProcess.start, ServerProcess.stop
        real_release = PrelaunchedServer.release

        def start(server: ServerProcess) -> None:
            real_start(server)
            self.spawned[id(server)] = time.monotonic()
            self.servers.append(server)

        def stop(server: ServerProcess, *args: Any, **kwargs: Any) -> None:
            real_stop(server, *args, **kwargs)
            self.stopped.setdefault(id(server), time.monotonic())

        def release(server: PrelaunchedServer) -> None:
            for old in self.servers:
                if old is not server and (group_members(old.pgid or 0) or old.alive()):
                    self.met.append(f"server {old.pid} alive at go")
                if old is not server and not port_is_free(old.launch.host, old.launch.port):
                    self.met.append(f"port {old.launch.port} held at go")
            self.went[id(server)] = time.monotonic()
            real_release(server)

        monkeypatch.setattr(ServerProcess, "start", start)
        monkeypatch.setattr(ServerProcess, "stop", stop)
        monkeypatch.setattr(PrelaunchedServer, "release", release)

    def ahead(self) -> list[PrelaunchedServer]:
        return [s for s in self.servers if isinstance(s, PrelaunchedServer)]


def test_the_next_server_imports_while_the_last_one_stops_and_goes_once_it_is_gone(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_VLLM_IMPORT_S", str(IMPORT_S))
    monkeypatch.setenv("FAKE_VLLM_FAULTS", f"stop_delay={STOP_S}")  # a GPU server's shutdown
    seen = Seen(monkeypatch)
    status, runs = run_two(lab_home, module_spec())
    assert status == "done" and [r["status"] for r in runs] == ["done", "done"]
    first, second = seen.servers
    assert not isinstance(first, PrelaunchedServer) and isinstance(second, PrelaunchedServer)
    # spawned while the first still stopped; let go only after its stop was over, nothing left
    assert seen.spawned[id(second)] < seen.stopped[id(first)] <= seen.went[id(second)]
    assert seen.met == []
    # its imports were done while the first stopped, before it was let go
    assert second.marks is not None and second.marks.imports_s >= IMPORT_S
    assert second.marks.imported_at < seen.went[id(second)]
    # its log is the run's own, named by the run's uid
    assert runs[1]["log_path"] == str(second.log_path) and runs[1]["uid"] in second.log_path.name
    # time to healthy as a plain start shows it: its imports included
    tth = runs[1]["time_to_healthy_s"]
    assert tth >= IMPORT_S and runs[0]["time_to_healthy_s"] >= IMPORT_S
    phases = runs[1]["startup"]["anatomy"]["phases"]
    assert phases[0]["key"] == "prelaunch_imports"
    # the run's anatomy adds up; the start it paid plus what was hidden is its time to healthy
    anat = runs[1]["anatomy"]
    assert adds_up(anat) and adds_up(runs[0]["anatomy"])
    hidden = [p["seconds"] for p in anat["overlapped"] if p["key"] == "prelaunch_ahead"]
    assert len(hidden) == 1 and hidden[0] >= IMPORT_S
    start = sum(p["seconds"] for p in anat["parts"] if p["key"] == "start")
    assert start + hidden[0] == pytest.approx(tth, abs=0.3)
    assert not any(s.alive() or group_members(s.pgid or 0) for s in seen.servers)
    # compare, Live and the report say it per experiment
    with connect(lab_home / "lab.db", readonly=True) as db:
        (spent,) = time_spent.report(db, runs)
    assert spent["hidden_start_s"] == pytest.approx(hidden[0])
    assert any(line.startswith("starts overlapped: 1 of 2 servers") for line in spent["lines"])


@pytest.mark.parametrize("how", ["setting off", "command not wrapped"])
def test_off_or_a_command_the_launcher_cannot_wrap_starts_as_before(
    how: str, lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = module_spec()
    if how == "setting off":
        monkeypatch.setenv("TUNING_LAB_PRELAUNCH", "0")
    else:  # an interpreter option before the script: not `<python> FILE` or `<python> -m M`
        spec = dataclasses.replace(spec, command=[spec.command[0], "-u", str(FAKE_VLLM)])
    seen = Seen(monkeypatch)
    status, runs = run_two(lab_home, spec)
    assert status == "done" and len(seen.servers) == 2 and seen.ahead() == []
    for run in runs:
        assert "prelaunch" not in run["startup"]["anatomy"]
        assert not [p for p in run["anatomy"]["overlapped"] if p["key"] == "prelaunch_ahead"]
        assert adds_up(run["anatomy"])
    with connect(lab_home / "lab.db", readonly=True) as db:
        (spent,) = time_spent.report(db, runs)
    assert spent["hidden_start_s"] == 0 and not any("overlapped" in t for t in spent["lines"])


def test_stop_while_the_next_server_imports_leaves_no_process(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen(monkeypatch)
    real_spawn = RunUnit._spawn_ahead

    def spawn_then_stop(unit: RunUnit) -> None:
        monkeypatch.setenv("FAKE_VLLM_IMPORT_S", "30")  # still importing when Stop comes
        real_spawn(unit)
        unit.book.live.cancel.set()  # the user's Stop, right after the spawn

    monkeypatch.setattr(RunUnit, "_spawn_ahead", spawn_then_stop)
    began = time.monotonic()
    status, runs = run_two(lab_home, module_spec())
    assert status == "cancelled" and len(runs) == 1
    (ahead,) = seen.ahead()
    assert not ahead.alive() and not group_members(ahead.pgid or 0)
    assert id(ahead) not in seen.went  # never let go
    assert time.monotonic() - began < 60  # its imports were not waited for


def test_an_import_error_of_the_server_spawned_ahead_is_its_runs_failed_start(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_spawn = RunUnit._spawn_ahead

    def broken_spawn(unit: RunUnit) -> None:
        monkeypatch.setenv("FAKE_VLLM_IMPORT_ERROR", "fake broken install: no module named torch")
        real_spawn(unit)

    monkeypatch.setattr(RunUnit, "_spawn_ahead", broken_spawn)
    seen = Seen(monkeypatch)
    _, runs = run_two(lab_home, module_spec())
    assert [r["status"] for r in runs] == ["done", "failed"]
    assert len(seen.ahead()) == 1
    failed = runs[1]
    assert "fake broken install: no module named torch" in failed["failure_reason"]
    assert adds_up(failed["anatomy"])
    assert "start_failed" in [p["key"] for p in failed["anatomy"]["parts"]]
    assert not any(s.alive() or group_members(s.pgid or 0) for s in seen.servers)


def test_a_port_taken_while_the_server_waited_for_go_is_left_alone_and_the_run_starts_afresh(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = Seen(monkeypatch)
    real_spawn = RunUnit._spawn_ahead
    held: list[ForeignProcess] = []

    with ExitStack() as stack:

        def spawn_then_take_its_port(unit: RunUnit) -> None:
            real_spawn(unit)
            if unit.ahead is None:  # the last run: nothing after it
                return
            port = unit.ahead.server.launch.port
            held.append(stack.enter_context(foreign_listener(port)))

        monkeypatch.setattr(RunUnit, "_spawn_ahead", spawn_then_take_its_port)
        status, runs = run_two(lab_home, module_spec())
        assert status == "done" and [r["status"] for r in runs] == ["done", "done"]
        (ahead,) = seen.ahead()
        assert id(ahead) not in seen.went and not group_members(ahead.pgid or 0)
        assert len(seen.servers) == 3  # the first, the one spawned ahead, the second's own
        assert held[0].untouched()  # someone else's listener: never signalled
