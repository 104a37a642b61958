"""One value's run, from its row to its stored result: the one path every caller takes.

The local runner's loop, `--repeats auto`, a search's steps and a fleet worker (on its node, over a
scratch database) all call `RunUnit.run`; nothing else creates a run row or starts a server for
one, so "what a run is" lives here only. The unit reads everything from the experiment record
(`Bookkeeping.exp`, the row as the store decodes it), never from a list of chosen columns.

Every run's evidence is its own: the server log is named by the run's unique id (`run-<uid>.log`,
truncated at launch, never appended to), so two databases under one lab home, or a deleted and
re-created lab.db, can never read another run's engine pids or KV size.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.plausible import amount, count
from core.status import Status
from store import repo
from tuning.engine import effective, hardware, predict
from tuning.engine.identity import engine_identity
from tuning.engine.launch import Launch
from tuning.engine.params import Param, format_value, get_param
from tuning.engine.server import ServerProcess, StartFailure, port_is_free
from tuning.engine.spec import EngineSpec
from tuning.experiment import outcome, planned, prelaunching
from tuning.experiment.bookkeeping import Bookkeeping
from tuning.experiment.load_prep import LoadPrep
from tuning.experiment.measure import measure
from tuning.experiment.resident import ResidentEngines
from tuning.experiment.run_anatomy import RunClock
from tuning.experiment.sampling import RunSamples
from tuning.experiment.stopping import BackgroundStop
from tuning.experiment.watch import serving
from tuning.measure.loadgen import child as loadgen_child
from tuning.measure.telemetry.gpu import GpuSampler, read_gpu_used, wait_gpu_memory_released
from tuning.measure.telemetry.proctree import ProcessTreeSampler
from tuning.measure.telemetry.prom import MetricsSampler
from tuning.measure.traffic import WorkloadSpec
from tuning.measure.traffic.workload import Workload
from tuning.settings import lab_home

# Between two reads of device memory while a stopped server's memory comes back (NVML's default
# here was 0.5 s: up to half a second a restart spent waiting for nothing).
RELEASE_POLL_S = 0.1


def default_log_dir() -> Path:
    """Where server logs live: one folder for every database under this lab home (the names are
    run uids, so databases never share a file)."""
    return lab_home() / "logs" / "runs"


def log_path_for(log_dir: Path, uid: str) -> Path:
    return log_dir / f"run-{uid}.log"


def engine_of(exp: dict[str, Any]) -> EngineSpec | None:
    """The experiment's engine; None when it measures a server the lab did not start."""
    data = exp.get("engine")
    return EngineSpec(**data) if data else None


def param_of(exp: dict[str, Any]) -> Param:
    """The experiment's parameter: curated, or a flag of its engine's vLLM learned when planned."""
    engine = engine_of(exp)
    return get_param(exp["param"], engine.learned_params() if engine else None)


def run_inputs(
    exp: dict[str, Any], value: Any
) -> tuple[dict[str, Any], Workload, WorkloadSpec | None]:
    """The configuration, workload and spec of the experiment's run at `value`: the baseline with
    the one parameter changed, in the server's flags or in the workload."""
    param = param_of(exp)
    config = dict(exp.get("config") or {})
    wl, spec = Workload.from_dict(exp["workload"]), planned.spec_of(exp.get("workload_spec"))
    if param.restarts_server:
        config[param.name] = value
    else:
        wl, spec = planned.apply_value(wl, spec, param.name, value)
    return config, wl, spec


def new_run_fields(
    exp: dict[str, Any], seq: int, value: Any, repeat: int, hw: dict[str, Any] | None
) -> dict[str, Any]:
    """The columns of a new run row of `exp` at `value` (the fleet's driver writes the same row in
    the lab's database when it dispatches; the worker's measured columns replace it later)."""
    engine = engine_of(exp)
    config, wl, spec = run_inputs(exp, value)
    on_engine = engine is not None and hw is not None
    return {
        "uid": repo.new_uid(),  # names the run everywhere, its server log too
        "experiment_id": exp["id"],
        "seq": seq,
        "repeat_index": repeat,
        "param": param_of(exp).name,
        "value": format_value(value),
        "config_json": config,
        **planned.run_fields(wl, spec),
        "engine": engine.name if engine else "attached",
        "vllm_version": engine.vllm_version if engine else None,
        "model": exp.get("model"),
        "backend": engine.backend if engine else None,
        "engine_identity_json": engine_identity(engine) if engine else None,  # what reuse matches
        "hardware": hw["summary"] if on_engine and hw else None,
        "hardware_json": hw if on_engine else None,
        "base_url": exp.get("base_url"),
        "started_at": now_iso(),
        "author": exp.get("author"),
        "host": exp.get("host"),
        "status": Status.RUNNING,
        **(predict.run_columns(engine, config, hw) if engine and hw else {}),  # expected KV
    }


class RunUnit:
    """Runs the values of one experiment, one at a time, keeping the server between runs when a
    value does not restart it. Close it (or `stop_server`) when done: it owns the server."""

    def __init__(
        self, book: Bookkeeping, start_timeout: float = 300.0, log_dir: Path | None = None
    ) -> None:
        self.book = book
        self.start_timeout = start_timeout
        self.log_dir = log_dir or default_log_dir()
        self.server: ServerProcess | None = None
        self.server_facts: dict[str, Any] = {}
        self.server_check: effective.Check | None = None  # asked vs run with, read at start
        self.server_t0 = 0.0
        self.run_uid = ""  # the uid of the run in hand
        self.samples = RunSamples(book.db_path, self.relabel)
        # Device memory before any server of ours: each restart waits until it is back to this.
        self.gpu_baseline = read_gpu_used()
        # The next run's window begins here: the runner's start, then each run's end.
        self.clock = RunClock(time.monotonic(), "runner_start")
        self._stopping: BackgroundStop | None = None  # a server's stop begun after its load
        self.loads = LoadPrep()  # each workload's prompts, built once for the runs after it
        self.resident: ResidentEngines | None = None  # decided at the first run (resident.py)
        # The run after the one in hand (value, repeat), when the caller knows it; and its server,
        # spawned ahead to import while this run stores (tuning.experiment.prelaunching).
        self.next_at: tuple[Any, int] | None = None
        self.ahead: prelaunching.Ahead | None = None

    def begin_window(self) -> None:
        """The first run's window begins now (the runner calls it once it is running)."""
        self.clock = RunClock(time.monotonic(), self.clock.first)

    # -- one run --------------------------------------------------------------------------------
    def run(self, seq: int, value: Any, repeat: int, uid: str | None = None) -> int:
        """Create the run's row (with `uid` when the caller already named the run), start or reuse
        the server, measure, store; a failure is stored on the run and its id returned."""
        book, exp = self.book, self.book.exp
        clock = self.clock
        clock.mark("prepare")
        engine = engine_of(exp)
        config, wl, spec = run_inputs(exp, value)
        fields = new_run_fields(
            exp, seq, value, repeat, hardware.hardware_details() if engine else None
        )
        ahead = self.ahead
        if ahead is not None and (uid or ahead.at != (value, repeat)):
            self._discard_ahead()  # spawned for another run than this one
        elif ahead is not None:
            fields["uid"] = ahead.uid  # its log is named by it
        if uid:
            fields["uid"] = uid
        if self.resident is None:
            self.resident = ResidentEngines(book, engine, param_of(exp))
        fields["config_json"] = self.resident.config_for(config)
        run_id = repo.create_run(book.db, **fields)
        self.run_uid = str(fields["uid"])
        clock.on_change = lambda anatomy: self._store_anatomy(run_id, anatomy)
        self._store_anatomy(run_id, clock.snapshot())
        try:
            return self._run(run_id, engine, config, wl, spec, (value, repeat))
        finally:  # whatever ended it (a Stop, a failure, an interrupt): where its time went
            self._close_window(run_id)
            if self.ahead is not None and self.ahead.uid == self.run_uid:
                self._discard_ahead()  # spawned for this run, which did not start it
            if self.resident is not None:
                self.resident.after_run()  # the check of switched against restarted runs

    def _run(
        self,
        run_id: int,
        engine: EngineSpec | None,
        config: dict[str, Any],
        wl: Workload,
        spec: WorkloadSpec | None,
        at: tuple[Any, int] = (None, 0),
    ) -> int:
        book, exp = self.book, self.book.exp
        book.set_live(current_run_id=run_id, requests_done=0, requests_total=wl.num_requests)
        restart = param_of(exp).restarts_server
        try:
            base_url, t0 = self._ensure_server(run_id, config, engine, restart, at)
        except StartFailure as failure:
            self.clock.mark("storing")
            book.fail_run(
                run_id,
                failure.kind,
                failure.reason,
                failure.hint,
                log_tail=failure.log_tail,
                **({"vllm_version": failure.vllm_version} if failure.vllm_version else {}),
            )
            book.progress("run_failed", {"run_id": run_id, **failure.to_dict()})
            return run_id
        except Exception as exc:  # port still busy, a locked DB, a lab bug: this value failed
            return self._lab_failure(run_id, exc, outcome.exception_kind(exc))
        if book.live.cancel.is_set():
            self.clock.mark("storing")
            book.finish_run(run_id, Status.CANCELLED)
            return run_id
        try:
            return measure(self, run_id, base_url, t0, wl, engine, spec, clock=self.clock)
        except Exception as exc:  # a lab bug or a lost server: this value failed, the rest go on
            kind = outcome.exception_kind(exc)
            return self._lab_failure(
                run_id, exc, "measurement_error" if kind == "lab_error" else kind
            )

    def _lab_failure(self, run_id: int, exc: Exception, kind: str) -> int:
        """Store the run failed with `kind` and the traceback, stop its server, go on."""
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        reason = f"{type(exc).__name__}: {exc}"[:2000]
        self.clock.mark("storing")
        self.book.fail_run(run_id, kind, reason, outcome.HINTS[kind], log_tail=tb[-4000:])
        self.book.progress("run_failed", {"run_id": run_id, "kind": kind, "reason": reason})
        try:
            self.clock.mark("stop")
            self.stop_server()
        except Exception as stop_exc:  # noqa: BLE001 (the next value's start will say it again)
            print(f"runner: stop after a failure: {stop_exc}", file=sys.stderr, flush=True)
        return run_id

    # -- where the run's time went ---------------------------------------------------------------
    def _store_anatomy(self, run_id: int, anatomy: dict[str, Any]) -> None:
        """Write the run's anatomy so far (Live reads it); a failed write only loses a frame."""
        try:
            repo.update_run(self.book.db, run_id, anatomy_json=anatomy)
        except Exception as exc:  # noqa: BLE001 (a locked DB must not fail the run)
            print(f"runner: anatomy not written: {exc}", file=sys.stderr, flush=True)

    def _close_window(self, run_id: int) -> None:
        """The run's end: its anatomy stored whole; the next run's window begins here."""
        clock = self.clock
        clock.on_change = None
        anatomy = clock.close()
        self.clock = RunClock(clock.closed_at or time.monotonic(), "between")
        self._store_anatomy(run_id, anatomy)

    # -- the server -----------------------------------------------------------------------------
    def _ensure_server(
        self,
        run_id: int,
        config: dict[str, Any],
        engine: EngineSpec | None,
        restart: bool,
        at: tuple[Any, int] = (None, 0),
    ) -> tuple[str, float]:
        """A healthy server for this run; a restart for every server parameter (and repeat),
        or a resident server switched to (tuning.experiment.resident)."""
        book = self.book
        if engine is None:
            repo.update_run(book.db, run_id, phase="attached")
            return str(book.exp["base_url"]), time.monotonic()
        if self.server is not None and not restart and serving(self.server):
            self.store_server_facts(run_id, reused=True)
            return self.server.launch.base_url, self.server_t0
        resident = self.resident
        if restart and resident is not None and resident.active:
            served = resident.serve(self, run_id, at[0], at[1], config, engine)
            if served is not None:
                return served
        # a port of its own: the previous server may hold one
        launch = resident.launch_for(engine, config) if resident else engine.launch(config)
        return self.start_fresh(run_id, launch, engine)

    def start_fresh(
        self, run_id: int, launch: Launch, engine: EngineSpec, part: str = "start"
    ) -> tuple[str, float]:
        """Stop the server in hand (if any), start `launch` and wait until it is healthy; the
        start is the run's part `part`."""
        book, clock = self.book, self.clock
        if self.server is not None or self._stopping is not None:
            clock.mark("stop")
            book.phase("stopping", run_id)
            self.stop_server()
        book.phase("starting", run_id)
        # a start that is not the run's own (the KV probe) keeps its log beside the run's
        own = self.run_uid if part == "start" else f"{self.run_uid}-{part}"
        log_path = log_path_for(self.log_dir, own)
        ahead = self._adopt_ahead(launch)
        server = ahead.server if ahead is not None else ServerProcess(launch, log_path)
        launch = server.launch  # the one spawned ahead has a port of its own
        repo.update_run(
            book.db, run_id, argv_json=launch.argv, env_json=launch.env, log_path=str(log_path)
        )
        self.server_t0 = time.monotonic()
        self.server_facts = {}
        self.server_check = None
        self.server = server  # before start(): whatever happens next, stop_server stops it
        clock.mark(part, at=self.server_t0)
        try:
            if ahead is not None:
                ahead.server.release()  # the previous server's port and memory are free now
            else:
                server.start()
        except StartFailure:
            self.server = None  # nothing was started (the port was someone else's)
            raise
        # Sampling starts with the process, so the climb through weights and KV allocation is kept.
        pid = server.pid or 0
        self.samples.start(
            run_id,
            self.server_t0,
            [ProcessTreeSampler(pid, period=0.1), GpuSampler(pid, period=0.1)],
        )
        repo.update_run(
            book.db, run_id, server_pid=server.pid, server_start_time_s=server.start_time
        )
        book.phase("waiting_health", run_id)
        try:
            facts = server.wait_healthy(self.start_timeout)
        except StartFailure:
            clock.mark("start_failed", at=server.failed_at)
            self.samples.finish()
            self.server = None
            raise
        if server.healthy_at is not None:
            clock.mark("engine_facts", at=server.healthy_at)
        if ahead is not None:  # its spawn and imports, done while the previous server stopped
            clock.beside("prelaunch_ahead", ahead.server.hidden_s())
        self.server_facts = facts.to_dict()
        self.server_check = effective.check_start(launch, server.sheet or "", facts, engine.backend)
        self.samples.add(MetricsSampler(launch.base_url, period=0.5))
        self.store_server_facts(run_id, reused=False)
        return launch.base_url, self.server_t0

    def store_server_facts(self, run_id: int, reused: bool) -> None:
        f = self.server_facts
        repo.update_run(
            self.book.db,
            run_id,
            time_to_healthy_s=None if reused else amount(f.get("time_to_healthy_s")),
            # the engine's own numbers, each only when it can be true (core.plausible)
            kv_cache_tokens=count(f.get("kv_cache_tokens")),
            kv_cache_memory_bytes=count(f.get("kv_cache_memory_bytes")),
            max_concurrency=amount(f.get("max_concurrency")),
            block_size=count(f.get("block_size")),
            weights_memory_gib=amount(f.get("weights_memory_gib")),
            startup_json={**f, "reused_server": reused},
            server_pid=self.server.pid if self.server else None,
            **effective.applied_columns(self.server_check),
        )
        if f.get("vllm_version"):  # what the server says beats what the settings guessed
            repo.update_run(self.book.db, run_id, vllm_version=f["vllm_version"])

    def stop_server(self) -> None:
        """Stop the server (by group) and wait until its port and device memory are free again;
        a stop begun in the background (`stop_soon`) is waited for, its error raised here."""
        stopping, self._stopping = self._stopping, None
        if stopping is not None:
            try:
                ahead = stopping.join()
            finally:
                self.samples.finish()
            self.clock.beside("stop_ahead", ahead)  # begun while the last run stored
            return
        server = self.server
        if server is not None:
            try:
                server.stop(wait_port=False)
                self.clock.mark("release")
                server.wait_port_released()
                if self.gpu_baseline:
                    wait_gpu_memory_released(self.gpu_baseline, poll=RELEASE_POLL_S)
            finally:
                self.server = None
                self.samples.finish()

    def stop_soon(self) -> None:
        """The run's load is over and the next run starts its own server: stop this one now, in
        the background, while the run is stored. Its samplers end first (their rows are the
        run's); the next start waits for the whole stop (`stop_server`)."""
        server = self.server
        restarts = param_of(self.book.exp).restarts_server
        if server is None or self._stopping is not None or not restarts:
            return
        if self.resident is not None and self.resident.active:
            return  # the next run sleeps it or restarts it (tuning.experiment.resident)
        self.samples.finish()
        self.server = None
        baseline = self.gpu_baseline

        def stop() -> None:
            server.stop()
            if baseline:
                wait_gpu_memory_released(baseline, poll=RELEASE_POLL_S)

        self._stopping = BackgroundStop(stop)
        self._spawn_ahead()

    # -- the next run's server, spawned ahead (tuning.experiment.prelaunching) --------------------
    def spawn_beside_load(self) -> None:
        """As this run's load begins, on a GPU engine with cores to spare: the next run's server,
        when that run starts one of its own, spawned now so its imports end before this run."""
        at, exp = self.next_at, self.book.exp
        engine = engine_of(exp)
        if at is None or engine is None or not param_of(exp).restarts_server:
            return
        if not prelaunching.beside_load(engine.backend, os.cpu_count()):
            return
        resident = self.resident
        if resident is not None and resident.active and not resident.starts(*at):
            return  # that run switches to a server parked, it starts none
        self._spawn_ahead()

    def ready_next_load(self) -> None:
        """On a GPU engine with cores to spare, the next run's load generator starts now (its
        Python start and imports, a second a run on an H100) while this run is stored and the
        next server starts or wakes; a CPU engine's cores are its own then."""
        engine = engine_of(self.book.exp)
        if engine is not None and prelaunching.beside_load(engine.backend, os.cpu_count()):
            loadgen_child.prespawn()

    def _spawn_ahead(self) -> None:
        """Spawn the next run's server to import now (its load is over: no CPU is taken from
        it); it runs only when the next run lets it go."""
        at, exp = self.next_at, self.book.exp
        engine = engine_of(exp)
        if at is None or engine is None or self.ahead is not None or self.book.live.cancel.is_set():
            return
        try:
            config = run_inputs(exp, at[0])[0]
            resident = self.resident
            launch = resident.launch_for(engine, config) if resident else engine.launch(config)
        except Exception:  # noqa: BLE001 (a value its own run refuses, in its own words)
            return
        self.ahead = prelaunching.spawn(at, launch, lambda uid: log_path_for(self.log_dir, uid))

    def _adopt_ahead(self, launch: Launch) -> prelaunching.Ahead | None:
        """The server spawned ahead for this run, when it is this very launch (else stopped)."""
        ahead, self.ahead = self.ahead, None
        if ahead is None:
            return None
        mine = ahead.server.launch
        if (
            ahead.uid == self.run_uid
            and prelaunching.same_start(mine, launch)
            and port_is_free(mine.host, mine.port)  # taken while it waited: start afresh
        ):
            return ahead
        prelaunching.discard(ahead)
        return None

    def _discard_ahead(self) -> None:
        ahead, self.ahead = self.ahead, None
        prelaunching.discard(ahead)

    def close(self) -> None:
        """Stop the server and the samplers (and any resident server asleep); safe to call
        twice."""
        try:
            self._discard_ahead()
            self.stop_server()
        finally:
            loadgen_child.discard_spare()
            self.samples.finish()
            if self.resident is not None:
                self.resident.close()

    def relabel(self, run_id: int) -> None:
        """Process labels from the engine's own log lines (`(EngineCore pid=N)`)."""
        pids = self.server_facts.get("engine_pids") or {}
        names = {
            int(pid): name
            for name, pid in pids.items()
            if name in ("APIServer", "EngineCore") or name.startswith(("Worker", "EngineCore"))
        }
        if names:
            repo.relabel_processes(self.book.db, run_id, names)
