"""An experiment, value by value: restart vLLM with the one changed parameter, warm up, load while
sampling, store; a failed value is a result and the experiment goes on.

The runner is its own process (`python -m tuning run-experiment`, started by the supervisor in its
own session) so it outlives the page that asked for it. SQLite is its only output: progress, phase,
heartbeat, runs, per-request rows and samples. It owns one connection per thread that writes (its
own, the heartbeat's, the telemetry sink's) and closes each when that thread is done.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sqlite_utils import Database

from core.clock import now_iso
from core.records import SampleRow
from core.status import Status
from store import connect, open_db, queries, repo
from tuning import effective, hardware, predict
from tuning.engine import EngineSpec
from tuning.experiment import repeats
from tuning.experiment.lock import machine_lock
from tuning.experiment.plan import is_imported, refuse_imported, schedule
from tuning.params import format_value, get_param
from tuning.server import ServerProcess, StartFailure
from tuning.settings import lab_home
from tuning.telemetry.gpu import GpuSampler, read_gpu_used, wait_gpu_memory_released
from tuning.telemetry.peaks import peaks
from tuning.telemetry.proctree import ProcessTreeSampler
from tuning.telemetry.prom import MetricsSampler
from tuning.telemetry.recorder import Sampler, Telemetry
from tuning.workload import LocalTokenizer, ServerTokenizer, Workload, build_prompts

HEARTBEAT_S = 2.0
Progress = Callable[[str, dict[str, Any]], None]


@dataclass
class _Live:
    """What the heartbeat thread writes; the runner thread updates it."""

    phase: str = "starting"
    requests_done: int = 0
    requests_total: int = 0
    current_run_id: int | None = None
    cancel: threading.Event = field(default_factory=threading.Event)


class ExperimentRunner:
    """Runs one stored experiment; use it as a context manager so its connection is closed."""

    def __init__(
        self,
        db_path: str | Path,
        experiment_id: int,
        progress: Progress | None = None,
        start_timeout: float = 300.0,
    ):
        self.db_path = Path(db_path)
        self.db = open_db(self.db_path)  # the runner thread's connection, closed by close()
        self.experiment_id = experiment_id
        self.exp = queries.get_experiment(self.db, experiment_id)
        if is_imported(self.exp):  # an imported experiment's engine command never runs here
            self.db.conn.close()
            refuse_imported(self.exp)
        self.progress = progress or (lambda event, data: None)
        self.start_timeout = start_timeout
        self.live = _Live()
        self.server: ServerProcess | None = None
        self.server_facts: dict[str, Any] = {}
        self.server_check: effective.Check | None = None  # asked vs run with, read at start
        self.server_t0 = 0.0
        self._lock = threading.Lock()
        self._stop_heartbeat = threading.Event()
        self._telemetry: Telemetry | None = None
        self._telemetry_run: int | None = None
        self._sink_db: Database | None = None
        self.log_dir = lab_home() / "logs" / f"experiment-{experiment_id}"
        # Device memory before any server of ours: each restart waits until it is back to this.
        self.gpu_baseline = read_gpu_used()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.db.conn.close()

    # -- heartbeat ------------------------------------------------------------------------------
    def _heartbeat(self) -> None:
        with connect(self.db_path) as db:
            while not self._stop_heartbeat.wait(HEARTBEAT_S):
                self._beat(db)

    def _beat(self, db: Database) -> None:
        with self._lock:
            fields = {
                "heartbeat_at": now_iso(),
                "phase": self.live.phase,
                "requests_done": self.live.requests_done,
                "requests_total": self.live.requests_total,
                "current_run_id": self.live.current_run_id,
            }
        repo.update_experiment(db, self.experiment_id, **fields)
        if queries.cancel_requested(db, self.experiment_id):
            self.live.cancel.set()

    def _phase(self, phase: str, run_id: int | None = None) -> None:
        with self._lock:
            self.live.phase = phase
            if run_id is not None:
                self.live.current_run_id = run_id
        if run_id is not None:
            repo.update_run(self.db, run_id, phase=phase)
        self._beat(self.db)
        self.progress("phase", {"phase": phase, "run_id": run_id})

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> list[int]:
        exp = self.exp
        repo.update_experiment(
            self.db,
            self.experiment_id,
            status=Status.RUNNING,
            started_at=now_iso(),
            runner_pid=os.getpid(),
            heartbeat_at=now_iso(),
        )
        beat = threading.Thread(target=self._heartbeat, daemon=True)
        beat.start()
        run_ids: list[int] = []
        status, error = Status.DONE, None
        try:
            workload = Workload.from_dict(exp["workload"])
            plan = schedule(list(exp["values"]), int(exp["repeats"] or 1))
            if exp.get("fleet"):  # the runs go to the fleet's workers instead (tuning.fleet)
                from tuning.fleet.executor import run_on_fleet

                run_ids, plan = run_on_fleet(self, plan, workload), []
            for seq, (value, repeat) in enumerate(plan):
                if self.live.cancel.is_set():
                    break
                run_ids.append(self._run_value(seq, value, repeat, workload))
                repo.update_experiment(self.db, self.experiment_id, runs_done=seq + 1)
                self.progress(
                    "run_done", {"done": seq + 1, "total": len(plan), "run_id": run_ids[-1]}
                )
            run_ids += repeats.extend(self, workload)  # --repeats auto: more rounds until decided
            if self.live.cancel.is_set():
                status = Status.CANCELLED
        except Exception as exc:  # the experiment row must say why it stopped
            status, error = Status.FAILED, f"{type(exc).__name__}: {exc}"
            raise
        finally:
            self._phase("stopping")
            self._stop_server()
            self._finish_telemetry()  # an attached server's samplers, if a value failed early
            self._stop_heartbeat.set()
            beat.join(timeout=5)
            repo.update_experiment(
                self.db,
                self.experiment_id,
                status=status,
                error=error,
                phase=status,
                finished_at=now_iso(),
                heartbeat_at=now_iso(),
            )
        return run_ids

    def _engine(self) -> EngineSpec | None:
        data = self.exp.get("engine")
        return EngineSpec(**data) if data else None

    def _run_value(self, seq: int, value: Any, repeat: int, workload: Workload) -> int:
        exp = self.exp
        param = get_param(exp["param"])
        engine = self._engine()
        config = dict(exp["config"] or {})
        wl = workload
        if param.restarts_server:
            config[param.name] = value
        else:
            wl = workload.with_value(param.name, value)
        hw = hardware.describe()
        run_id = repo.create_run(
            self.db,
            experiment_id=self.experiment_id,
            seq=seq,
            repeat_index=repeat,
            param=param.name,
            value=format_value(value),
            config_json=config,
            workload_json=wl.to_dict(),
            workload_fingerprint=wl.fingerprint(),
            engine=engine.name if engine else "attached",
            vllm_version=engine.vllm_version if engine else None,
            model=exp.get("model"),
            backend=engine.backend if engine else None,
            hardware=hw["summary"] if engine else None,
            hardware_json=hw if engine else None,
            base_url=exp.get("base_url"),
            started_at=now_iso(),
            author=exp.get("author"),
            host=exp.get("host"),
            status=Status.RUNNING,
            **(predict.run_columns(engine, config, hw) if engine else {}),  # expected KV cache
        )
        with self._lock:
            self.live.current_run_id = run_id
            self.live.requests_done = 0
            self.live.requests_total = wl.num_requests
        try:
            base_url, t0 = self._ensure_server(
                run_id, config, engine, restart=param.restarts_server
            )
        except StartFailure as failure:
            self._fail_run(
                run_id, failure.kind, failure.reason, failure.hint, log_tail=failure.log_tail
            )
            self.progress("run_failed", {"run_id": run_id, **failure.to_dict()})
            return run_id
        if self.live.cancel.is_set():
            self._finish_run(run_id, Status.CANCELLED)
            return run_id
        try:
            return self._measure(run_id, base_url, t0, wl, engine)
        except Exception as exc:  # a lab bug or a lost server: this value failed, the rest go on
            self._fail_run(
                run_id,
                "measurement_error",
                f"{type(exc).__name__}: {exc}"[:2000],
                "The load or its bookkeeping failed after the server was healthy; the "
                "traceback is in the runner's log.",
                log_tail=traceback.format_exc()[-4000:],
            )
            traceback.print_exc()
            self._stop_server()
            return run_id

    def _finish_run(self, run_id: int, status: Status, **fields: Any) -> None:
        repo.update_run(
            self.db, run_id, status=status, phase=status, finished_at=now_iso(), **fields
        )

    def _fail_run(self, run_id: int, kind: str, reason: str, hint: str, log_tail: str) -> None:
        self._finish_run(
            run_id,
            Status.FAILED,
            failure_kind=kind,
            failure_reason=reason,
            failure_hint=hint,
            log_tail=log_tail,
        )

    # -- server ---------------------------------------------------------------------------------
    def _ensure_server(
        self, run_id: int, config: dict[str, Any], engine: EngineSpec | None, restart: bool
    ) -> tuple[str, float]:
        """A healthy server for this run; a restart for every server parameter (and repeat)."""
        if engine is None:
            repo.update_run(self.db, run_id, phase="attached")
            return str(self.exp["base_url"]), time.monotonic()
        if self.server is not None and not restart and self.server.alive():
            self._store_server_facts(run_id, reused=True)
            return self.server.launch.base_url, self.server_t0
        self._phase("stopping", run_id)
        self._stop_server()
        self._phase("starting", run_id)
        launch = engine.launch(config)
        log_path = self.log_dir / f"run-{run_id}.log"
        server = ServerProcess(launch, log_path)
        repo.update_run(
            self.db, run_id, argv_json=launch.argv, env_json=launch.env, log_path=str(log_path)
        )
        self.server_t0 = time.monotonic()
        self.server_facts = {}
        self.server_check = None
        server.start()
        self.server = server
        # Sampling starts with the process, so the climb through weights and KV allocation is kept.
        pid = server.pid or 0
        self._start_telemetry(
            run_id,
            self.server_t0,
            [ProcessTreeSampler(pid, period=0.1), GpuSampler(pid, period=0.1)],
        )
        repo.update_run(self.db, run_id, server_pid=server.pid)
        self._phase("waiting_health", run_id)
        try:
            facts = server.wait_healthy(self.start_timeout)
        except StartFailure:
            self._finish_telemetry()
            self.server = None
            raise
        self.server_facts = facts.to_dict()
        self.server_check = effective.check_start(launch, server.log_text(), facts, engine.backend)
        if self._telemetry is not None:
            self._telemetry.add(MetricsSampler(launch.base_url, period=0.5))
        self._store_server_facts(run_id, reused=False)
        return launch.base_url, self.server_t0

    def _store_server_facts(self, run_id: int, reused: bool) -> None:
        f = self.server_facts
        repo.update_run(
            self.db,
            run_id,
            time_to_healthy_s=None if reused else f.get("time_to_healthy_s"),
            kv_cache_tokens=f.get("kv_cache_tokens"),
            kv_cache_memory_bytes=f.get("kv_cache_memory_bytes"),
            max_concurrency=f.get("max_concurrency"),
            block_size=f.get("block_size"),
            weights_memory_gib=f.get("weights_memory_gib"),
            startup_json={**f, "reused_server": reused},
            server_pid=self.server.pid if self.server else None,
            **effective.columns(self.server_check),
        )
        if f.get("vllm_version"):  # what the server says beats what the settings guessed
            repo.update_run(self.db, run_id, vllm_version=f["vllm_version"])

    def _stop_server(self) -> None:
        if self.server is not None:
            try:
                self.server.stop()
                if self.gpu_baseline:
                    wait_gpu_memory_released(self.gpu_baseline)
            finally:
                self.server = None
                self._finish_telemetry()

    # -- telemetry ------------------------------------------------------------------------------
    def _sink(self, rows: list[SampleRow]) -> None:
        """Called on the recorder's flusher thread only, with the connection opened for it."""
        run_id = self._telemetry_run
        if run_id is not None and rows and self._sink_db is not None:
            repo.insert_samples(self._sink_db, run_id, rows)

    def _start_telemetry(self, run_id: int, t0: float, samplers: list[Sampler]) -> None:
        """Samples for `run_id` from now on, written by the recorder's flusher thread through a
        connection of its own; `_finish_telemetry` closes it."""
        self._finish_telemetry()
        self._sink_db = open_db(self.db_path)
        self._telemetry_run = run_id
        self._telemetry = Telemetry(origin=t0)
        self._telemetry.start(samplers, self._sink)

    def _finish_telemetry(self) -> None:
        if self._telemetry is not None:
            self._telemetry.stop()
            self._telemetry = None
            if self._telemetry_run is not None:
                self._relabel(self._telemetry_run)
        if self._sink_db is not None:
            self._sink_db.conn.close()
            self._sink_db = None

    def _relabel(self, run_id: int) -> None:
        """Process labels from the engine's own log lines (`(EngineCore pid=N)`)."""
        pids = self.server_facts.get("engine_pids") or {}
        names = {
            int(pid): name
            for name, pid in pids.items()
            if name in ("APIServer", "EngineCore") or name.startswith(("Worker", "EngineCore"))
        }
        if names:
            repo.relabel_processes(self.db, run_id, names)

    # -- measuring ------------------------------------------------------------------------------
    def _measure(
        self, run_id: int, base_url: str, t0: float, wl: Workload, engine: EngineSpec | None
    ) -> int:
        from tuning.health import run_health, server_summary
        from tuning.loadgen.child import run_load_in_subprocess
        from tuning.metrics import summarize

        attached = engine is None
        if attached:
            self._start_telemetry(run_id, t0, [MetricsSampler(base_url, period=0.5)])
        elif self._telemetry is not None:
            self._telemetry_run = run_id  # a reused server's samples belong to this run now
        model = str(self.exp.get("model") or (engine.served_model_name if engine else ""))
        prompts = build_prompts(wl, _tokenizer_for(engine, base_url, model))
        self._phase("warming_up", run_id)
        marks: dict[str, Any] = {}

        def on_phase(phase: str) -> None:
            if phase == "loading":
                marks["load_start"] = time.monotonic() - t0
            self._phase(phase, run_id)

        def on_progress(done: int, total: int) -> None:
            with self._lock:
                self.live.requests_done = done
                self.live.requests_total = total

        result = run_load_in_subprocess(
            base_url,
            model,
            prompts,
            wl,
            api_key=os.environ.get("OPENAI_API_KEY"),
            on_progress=on_progress,
            cancel=self.live.cancel,
            on_phase=on_phase,
            server_stats=True,  # vLLM's counters, settled, around the measured phase
        )
        returned = time.monotonic() - t0  # after the child's settled /metrics read, too
        load_start = marks.get("load_start", returned - result.duration_s)
        load_end = min(returned, load_start + result.duration_s)
        self._phase("storing", run_id)
        if attached:
            self._finish_telemetry()
        elif self._telemetry is not None:
            self._telemetry.flush()
        repo.insert_requests(self.db, run_id, result.records)
        self._relabel(run_id)
        summary = summarize(result.records, result.duration_s)
        samples = queries.get_samples(self.db, run_id)
        rows = [SampleRow(s["t_s"], s["series"], s["value"], s["label"]) for s in samples]
        summary.update(
            peaks(rows, gpu_baseline=self.gpu_baseline or None, window=(load_start, load_end))
        )
        health = run_health(result, wl, samples, load_start)
        summary.update(server_summary(health))
        summary.update(
            achieved_concurrency=health["achieved_concurrency"],
            steady_output_throughput=health["steady_output_throughput"],
            client_bound=int(health["client_bound"]),
            load_window_s=[load_start, load_end],
        )
        health["client"] = result.health()
        repo.store_summary(self.db, run_id, summary)
        if self.server_check is not None:  # a limit the load shows was not applied
            repo.update_run(self.db, run_id, **effective.columns(self.server_check, health))
        cancelled = self.live.cancel.is_set() or result.cancelled
        self._finish_run(
            run_id,
            Status.CANCELLED if cancelled else Status.DONE,
            health_json=health,
            log_tail=self.server.log_tail() if self.server else None,
        )
        self.progress("measured", {"run_id": run_id, "summary": summary})
        return run_id


def _tokenizer_for(engine: EngineSpec | None, base_url: str, model: str) -> Any:
    if engine is not None:
        local = Path(engine.model) / "tokenizer.json"
        if local.exists():
            return LocalTokenizer(local)
    return ServerTokenizer(base_url, model)


def run_experiment(
    db_path: str | Path,
    experiment_id: int,
    progress: Progress | None = None,
    start_timeout: float = 300.0,
) -> list[int]:
    """Run a stored experiment in this process, holding the machine lock throughout."""
    with (
        machine_lock(),
        ExperimentRunner(db_path, experiment_id, progress, start_timeout) as runner,
    ):
        return runner.run()
