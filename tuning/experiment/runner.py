"""An experiment, value by value: restart vLLM with the one changed parameter, warm up, load while
sampling, store; a failed value is a result and the experiment goes on.

The runner is its own process (`python -m tuning run-experiment`, started by the supervisor in its
own session) so it outlives the page that asked for it. SQLite is its only output: progress, phase,
heartbeat, runs, per-request rows and samples. It owns one connection per thread that writes (its
own, the heartbeat's, the telemetry sink's) and closes each when that thread is done.

Every way out writes a terminal status: a value that raises fails that run (with its kind) and the
experiment goes on; Ctrl-C or SIGTERM marks the experiment and its open run cancelled; anything
else marks them failed with the reason. Finished runs are never run again: the runner takes the
schedule's pairs that have no finished run yet, which is also how `--resume` works.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.records import SampleRow
from core.status import Status
from store import queries, repo
from tuning import effective, hardware, predict
from tuning.engine import EngineSpec
from tuning.experiment import exits, outcome, planned, repeats
from tuning.experiment.bookkeeping import Bookkeeping, Progress
from tuning.experiment.lock import RunnerBusy, machine_lock
from tuning.experiment.plan import is_imported, refuse_imported, schedule
from tuning.experiment.sampling import RunSamples
from tuning.experiment.watch import EngineWatch, Heartbeat, serving
from tuning.params import format_value, get_param
from tuning.server import ServerProcess, StartFailure
from tuning.settings import lab_home
from tuning.telemetry.gpu import GpuSampler, read_gpu_used, wait_gpu_memory_released
from tuning.telemetry.peaks import peaks
from tuning.telemetry.proctree import ProcessTreeSampler
from tuning.telemetry.prom import MetricsSampler
from tuning.traffic import WorkloadSpec
from tuning.workload import LocalTokenizer, ServerTokenizer, Workload, build_prompts

HEARTBEAT_S = 2.0


class ExperimentRunner(Bookkeeping):
    """Runs one stored experiment; use it as a context manager so its connection is closed."""

    def __init__(
        self,
        db_path: str | Path,
        experiment_id: int,
        progress: Progress | None = None,
        start_timeout: float = 300.0,
    ):
        super().__init__(db_path, experiment_id, progress)
        if is_imported(self.exp):  # an imported experiment's engine command never runs here
            self.db.conn.close()
            refuse_imported(self.exp)
        self.start_timeout = start_timeout
        self.server: ServerProcess | None = None
        self.server_facts: dict[str, Any] = {}
        self.server_check: effective.Check | None = None  # asked vs run with, read at start
        self.server_t0 = 0.0
        self.samples = RunSamples(self.db_path, self._relabel)
        self.log_dir = lab_home() / "logs" / f"experiment-{experiment_id}"
        # Device memory before any server of ours: each restart waits until it is back to this.
        self.gpu_baseline = read_gpu_used()

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> list[int]:
        """Run every (value, repeat) pair without a finished run; the experiment's status at the
        end: done, failed (every run failed, or the lab did; `error` says why) or cancelled."""
        exp = self.exp
        self._mark_running()
        heartbeat = Heartbeat(self.db_path, self._beat, HEARTBEAT_S)
        heartbeat.start()
        run_ids: list[int] = []
        status, error = Status.DONE, None
        abort: BaseException | None = None
        try:
            workload = Workload.from_dict(exp["workload"])
            plan = schedule(list(exp["values"]), int(exp["repeats"] or 1))
            todo = outcome.remaining(plan, self._runs())
            if exp.get("fleet"):  # the runs go to the fleet's workers instead (tuning.fleet)
                from tuning.fleet.executor import run_on_fleet

                run_ids, todo = run_on_fleet(self, plan, workload, todo), []
            for seq in todo:
                if self.live.cancel.is_set():
                    break
                value, repeat = plan[seq]
                run_ids.append(self._run_value(seq, value, repeat, workload))
                done = len(plan) - len(outcome.remaining(plan, self._runs()))
                repo.update_experiment(self.db, self.experiment_id, runs_done=done)
                self.progress("run_done", {"done": done, "total": len(plan), "run_id": run_ids[-1]})
            run_ids += repeats.extend(self, workload)  # --repeats auto: more rounds until decided
            if self.live.cancel.is_set():
                status, error = Status.CANCELLED, "stopped by the user"
            else:
                status, error = outcome.experiment_verdict(self._runs())
        except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM as Interrupted
            status, error, abort = Status.CANCELLED, f"interrupted by {exits.signal_name(exc)}", exc
            raise
        except Exception as exc:  # the experiment row must say why it stopped
            status, error, abort = Status.FAILED, f"{type(exc).__name__}: {exc}", exc
            raise
        finally:
            with exits.signals_deferred():
                self._shut_down(heartbeat, status, error, abort)
        return run_ids

    def _shut_down(
        self, heartbeat: Heartbeat, status: Status, error: str | None, abort: BaseException | None
    ) -> None:
        """Stop what runs, then write the terminal statuses whatever failed on the way."""
        steps: list[Callable[[], None]] = [self._phase_stopping, self._stop_server]
        for step in [*steps, self.samples.finish]:
            try:
                step()
            except Exception as exc:  # noqa: BLE001 (the statuses below must still be written)
                print(f"runner: while stopping: {type(exc).__name__}: {exc}", file=sys.stderr)
        heartbeat.stop()
        self._write_end(status, error, abort)

    def _phase_stopping(self) -> None:
        self._phase("stopping")

    def _engine(self) -> EngineSpec | None:
        data = self.exp.get("engine")
        return EngineSpec(**data) if data else None

    def _run_value(self, seq: int, value: Any, repeat: int, workload: Workload) -> int:
        exp = self.exp
        param = get_param(exp["param"])
        engine = self._engine()
        config = dict(exp["config"] or {})
        wl, spec = workload, planned.spec_of(exp.get("workload_spec"))
        if param.restarts_server:
            config[param.name] = value
        else:
            wl, spec = planned.apply_value(workload, spec, param.name, value)
        hw = hardware.describe()
        run_id = repo.create_run(
            self.db,
            experiment_id=self.experiment_id,
            seq=seq,
            repeat_index=repeat,
            param=param.name,
            value=format_value(value),
            config_json=config,
            **planned.run_fields(wl, spec),
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
                run_id,
                failure.kind,
                failure.reason,
                failure.hint,
                log_tail=failure.log_tail,
                **({"vllm_version": failure.vllm_version} if failure.vllm_version else {}),
            )
            self.progress("run_failed", {"run_id": run_id, **failure.to_dict()})
            return run_id
        except Exception as exc:  # port still busy, a locked DB, a lab bug: this value failed
            return self._lab_failure(run_id, exc, outcome.exception_kind(exc))
        if self.live.cancel.is_set():
            self._finish_run(run_id, Status.CANCELLED)
            return run_id
        try:
            return self._measure(run_id, base_url, t0, wl, engine, spec)
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
        self._fail_run(run_id, kind, reason, outcome.HINTS[kind], log_tail=tb[-4000:])
        self.progress("run_failed", {"run_id": run_id, "kind": kind, "reason": reason})
        try:
            self._stop_server()
        except Exception as stop_exc:  # noqa: BLE001 (the next value's start will say it again)
            print(f"runner: stop after a failure: {stop_exc}", file=sys.stderr, flush=True)
        return run_id

    # -- server ---------------------------------------------------------------------------------
    def _ensure_server(
        self, run_id: int, config: dict[str, Any], engine: EngineSpec | None, restart: bool
    ) -> tuple[str, float]:
        """A healthy server for this run; a restart for every server parameter (and repeat)."""
        if engine is None:
            repo.update_run(self.db, run_id, phase="attached")
            return str(self.exp["base_url"]), time.monotonic()
        if self.server is not None and not restart and serving(self.server):
            self._store_server_facts(run_id, reused=True)
            return self.server.launch.base_url, self.server_t0
        self._phase("stopping", run_id)
        self._stop_server()
        self._phase("starting", run_id)
        launch = engine.launch(config)
        log_path = self.log_path(run_id)
        server = ServerProcess(launch, log_path)
        repo.update_run(
            self.db, run_id, argv_json=launch.argv, env_json=launch.env, log_path=str(log_path)
        )
        self.server_t0 = time.monotonic()
        self.server_facts = {}
        self.server_check = None
        self.server = server  # before start(): whatever happens next, _stop_server stops it
        try:
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
            self.db, run_id, server_pid=server.pid, server_start_time_s=server.start_time
        )
        self._phase("waiting_health", run_id)
        try:
            facts = server.wait_healthy(self.start_timeout)
        except StartFailure:
            self.samples.finish()
            self.server = None
            raise
        self.server_facts = facts.to_dict()
        self.server_check = effective.check_start(launch, server.log_text(), facts, engine.backend)
        self.samples.add(MetricsSampler(launch.base_url, period=0.5))
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

    def log_path(self, run_id: int) -> Path:
        """The server log of run `run_id` (a fleet worker names it by the lab's run id)."""
        return self.log_dir / f"run-{run_id}.log"

    def _stop_server(self) -> None:
        if self.server is not None:
            try:
                self.server.stop()
                if self.gpu_baseline:
                    wait_gpu_memory_released(self.gpu_baseline)
            finally:
                self.server = None
                self.samples.finish()

    # -- telemetry ------------------------------------------------------------------------------
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
        self,
        run_id: int,
        base_url: str,
        t0: float,
        wl: Workload,
        engine: EngineSpec | None,
        spec: WorkloadSpec | None = None,
    ) -> int:
        from tuning.health import run_health, server_summary
        from tuning.loadgen.child import run_load_in_subprocess
        from tuning.loadgen.client import LoadError
        from tuning.metrics import summarize

        attached = engine is None
        if attached:
            self.samples.start(run_id, t0, [MetricsSampler(base_url, period=0.5)])
        else:
            self.samples.retarget(run_id)  # a reused server's samples belong to this run now
        model = str(self.exp.get("model") or (engine.served_model_name if engine else ""))
        tokenizer, plan = _tokenizer_for(engine, base_url, model), None
        if spec is None:
            prompts, load_wl = build_prompts(wl, tokenizer), wl
        else:  # real traffic: the plan, its own warm-ups, and its fingerprint
            prep = planned.prepare(wl, spec, tokenizer)
            prompts, load_wl, plan = prep.warmup_prompts, prep.workload, prep.plan
            repo.update_run(self.db, run_id, workload_fingerprint=prep.fingerprint)
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

        with ExitStack() as stack:
            stop_load, watch = self.live.cancel, None
            if not attached and self.server is not None:  # our engine: watch it for death
                stop_load = threading.Event()
                watch = stack.enter_context(EngineWatch(self.server, self.live.cancel, stop_load))
            try:
                result = run_load_in_subprocess(
                    base_url,
                    model,
                    prompts,
                    load_wl,
                    plan=plan,
                    api_key=os.environ.get("OPENAI_API_KEY"),
                    on_progress=on_progress,
                    cancel=stop_load,
                    on_phase=on_phase,
                    server_stats=True,  # vLLM's counters, settled, around the measured phase
                )
            except LoadError:  # stopped before it could answer (the engine died, or Stop)
                if not stop_load.is_set():
                    raise
                return self._load_stopped(run_id, watch.verdict() if watch is not None else None)
        died = watch.verdict() if watch is not None else None
        returned = time.monotonic() - t0  # after the child's settled /metrics read, too
        load_start = marks.get("load_start", returned - result.duration_s)
        load_end = min(returned, load_start + result.duration_s)
        self._phase("storing", run_id)
        if attached:
            self.samples.finish()
        else:
            self.samples.flush()
        repo.insert_requests(self.db, run_id, result.records)
        if plan is not None:  # content hashes (and the text, kept local: bundles drop it)
            repo.store_request_prompts(self.db, run_id, planned.request_prompts(plan))
        self._relabel(run_id)
        summary = summarize(result.records, result.duration_s)
        samples = queries.get_samples(self.db, run_id)
        rows = [SampleRow(s["t_s"], s["series"], s["value"], s["label"]) for s in samples]
        summary.update(
            peaks(rows, gpu_baseline=self.gpu_baseline or None, window=(load_start, load_end))
        )
        health = run_health(result, load_wl, samples, load_start)
        summary.update(server_summary(health))
        if plan is not None:  # judged by its schedule, not by a closed loop's C
            summary["traffic"] = planned.judge(health, result.records, plan, result.duration_s)
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
        cancelled = self.live.cancel.is_set() or (result.cancelled and died is None)
        log_tail = self.server.log_tail(200) if self.server else None
        verdict = ("engine_died", outcome.engine_words(died, log_tail)) if died else None
        if verdict is None and not cancelled:
            verdict = outcome.requests_verdict(result.records)
        if verdict is not None:
            kind, reason = verdict
            self._fail_run(
                run_id, kind, reason, outcome.HINTS[kind], log_tail=log_tail, health_json=health
            )
            self.progress("run_failed", {"run_id": run_id, "kind": kind, "reason": reason})
        else:
            self._finish_run(
                run_id,
                Status.CANCELLED if cancelled else Status.DONE,
                health_json=health,
                log_tail=log_tail,
            )
        self.progress("measured", {"run_id": run_id, "summary": summary})
        return run_id

    def _load_stopped(self, run_id: int, died: str | None) -> int:
        """The load generator was stopped before it sent a result: nothing was measured."""
        if died is None:
            self._finish_run(run_id, Status.CANCELLED)
            return run_id
        log_tail = self.server.log_tail(200) if self.server else None
        reason = outcome.engine_words(died, log_tail)
        hint = outcome.HINTS["engine_died"]
        self._fail_run(run_id, "engine_died", reason, hint, log_tail=log_tail)
        self.progress("run_failed", {"run_id": run_id, "kind": "engine_died", "reason": reason})
        return run_id


def _tokenizer_for(engine: EngineSpec | None, base_url: str, model: str) -> Any:
    if engine is not None:
        local = Path(engine.model) / "tokenizer.json"
        if local.exists():
            return LocalTokenizer(local)
    return ServerTokenizer(base_url, model)


def _refuse_if_queued(db_path: str | Path, experiment_id: int, busy: RunnerBusy) -> None:
    """A queued experiment refused for a busy machine is failed, saying so (not queued for ever);
    one that another runner already runs is left alone."""
    from tuning.experiment.supervisor import settle

    settle(db_path, experiment_id, Status.FAILED, f"refused: {busy}; resume it when that one ends")


def run_experiment(
    db_path: str | Path,
    experiment_id: int,
    progress: Progress | None = None,
    start_timeout: float = 300.0,
) -> list[int]:
    """Run a stored experiment in this process, holding the machine lock throughout."""
    with ExitStack() as stack:
        try:
            stack.enter_context(machine_lock())
        except RunnerBusy as busy:
            _refuse_if_queued(db_path, experiment_id, busy)
            raise
        stack.enter_context(exits.sigterm_interrupts())
        runner = stack.enter_context(
            ExperimentRunner(db_path, experiment_id, progress, start_timeout)
        )
        return runner.run()
