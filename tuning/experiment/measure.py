"""The measured part of one run (tuning.experiment.run_unit): warm up, load while the samplers
record, watch the engine for death, then store the requests, the summary and the verdict (done,
suspect when numbers from outside cannot be true, failed, cancelled), the requests kept in a spool
file until every write went through (tuning.experiment.spool)."""

from __future__ import annotations

import os
import threading
import time
from contextlib import ExitStack
from typing import Protocol

from core.records import SampleRow
from core.status import Status
from store import repo, timeseries
from tuning.engine import effective
from tuning.engine.server import ServerProcess
from tuning.engine.spec import EngineSpec
from tuning.experiment import outcome, planned, spool
from tuning.experiment.bookkeeping import Bookkeeping
from tuning.experiment.load_prep import LoadPrep
from tuning.experiment.run_anatomy import RunClock
from tuning.experiment.sampling import RunSamples
from tuning.experiment.watch import EngineWatch
from tuning.measure.telemetry.peaks import peaks
from tuning.measure.telemetry.prom import MetricsSampler
from tuning.measure.traffic import WorkloadSpec
from tuning.measure.traffic.workload import FALLBACK_NOTE, FALLBACK_TOKENIZER_ID, Workload


class MeasuredUnit(Protocol):
    """What measuring uses of tuning.experiment.run_unit.RunUnit (which imports this module)."""

    book: Bookkeeping
    samples: RunSamples
    server: ServerProcess | None
    server_check: effective.Check | None
    gpu_baseline: dict[str, int]

    loads: LoadPrep

    def relabel(self, run_id: int) -> None: ...
    def stop_soon(self) -> None: ...
    def spawn_beside_load(self) -> None: ...
    def ready_next_load(self) -> None: ...


def measure(
    unit: MeasuredUnit,
    run_id: int,
    base_url: str,
    t0: float,
    wl: Workload,
    engine: EngineSpec | None,
    spec: WorkloadSpec | None = None,
    clock: RunClock | None = None,
) -> int:
    from tuning.measure.health import run_health, server_summary
    from tuning.measure.loadgen.child import run_load_in_subprocess
    from tuning.measure.loadgen.client import LoadError
    from tuning.measure.metrics import summarize

    book = unit.book
    attached = engine is None
    clock = clock or RunClock(time.monotonic(), "workload")
    clock.mark("workload")
    if not attached:
        unit.spawn_beside_load()  # a GPU engine's next server imports meanwhile (prelaunching)
    if attached:
        unit.samples.start(run_id, t0, [MetricsSampler(base_url, period=0.5)])
    else:
        unit.samples.retarget(run_id)  # a reused server's samples belong to this run now
    model = str(book.exp.get("model") or (engine.served_model_name if engine else ""))
    # built once per tokenizer and workload (tuning.experiment.load_prep), checked on each server
    prep = unit.loads.prepare(engine, base_url, model, wl, spec)
    tokenizer_id, prompts, load_wl, plan = prep.tokenizer_id, prep.prompts, prep.workload, prep.plan
    if tokenizer_id == FALLBACK_TOKENIZER_ID:
        book.progress("note", {"run_id": run_id, "note": FALLBACK_NOTE})
    if prep.fingerprint is not None:  # real traffic: the plan's own fingerprint
        repo.update_run(book.db, run_id, workload_fingerprint=prep.fingerprint)
    clock.mark("loadgen")
    book.phase("warming_up", run_id)

    def on_progress(done: int, total: int) -> None:
        book.set_live(requests_done=done, requests_total=total)

    def on_phase(phase: str) -> None:
        clock.mark({"warming_up": "warmup", "loading": "load"}.get(phase, phase))
        book.phase(phase, run_id)

    with ExitStack() as stack:
        stop_load, watch = book.live.cancel, None
        if not attached and unit.server is not None:  # our engine: watch it for death
            stop_load = threading.Event()
            watch = stack.enter_context(EngineWatch(unit.server, book.live.cancel, stop_load))
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
            return _load_stopped(unit, run_id, watch.verdict() if watch is not None else None)
    died = watch.verdict() if watch is not None else None
    returned = time.monotonic() - t0  # after the child's settled /metrics read, too
    # The load's start on the child's own clock (monotonic is system-wide), not when its
    # "loading" message reached this process.
    started = result.started_monotonic
    load_start = started - t0 if started is not None else returned - result.duration_s
    load_end = min(returned, load_start + result.duration_s)
    if not result.cancelled:  # the load's own clock, exact: its start and its end
        clock.retime("load", t0 + load_start)
        clock.mark("drain", at=t0 + load_end)
    clock.mark("storing", at=t0 + returned)
    log_tail = unit.server.log_tail(200) if unit.server else None  # before any stop's lines
    spooled = spool.keep(book.db_path, run_id, result.records, result.duration_s)  # until stored
    if spooled is None:
        book.progress("note", {"run_id": run_id, "note": spool.NOT_KEPT})
    book.phase("storing", run_id)
    if attached:
        unit.samples.finish()
    else:
        if died is None and not book.live.cancel.is_set():
            unit.stop_soon()  # when the next run restarts: stopped while this one is stored
            unit.ready_next_load()  # a GPU box's next load generator starts meanwhile
        unit.samples.flush()
    repo.insert_requests(book.db, run_id, result.records)
    if plan is not None:  # content hashes (and the text, kept local: bundles drop it)
        repo.store_request_prompts(book.db, run_id, planned.request_prompts(plan))
    unit.relabel(run_id)
    summary = summarize(result.records, result.duration_s)
    samples = timeseries.get_samples(book.db, run_id)
    rows = [SampleRow(s["t_s"], s["series"], s["value"], s["label"]) for s in samples]
    summary.update(
        peaks(
            rows,
            gpu_baseline=unit.gpu_baseline or None,
            window=(load_start, load_end),
            settled=(result.server_before, result.server_after),
        )
    )
    health = run_health(result, load_wl, samples, load_start)
    health["samples"] = unit.samples.loss().to_json()  # rows lost, ticks skipped: flagged
    summary.update(server_summary(health))
    if plan is not None:  # judged by its schedule, not by a closed loop's C
        summary["traffic"] = planned.judge_traffic(health, result.records, plan, result.duration_s)
    summary.update(
        achieved_concurrency=health["achieved_concurrency"],
        steady_output_throughput=health["steady_output_throughput"],
        client_bound=int(health["client_bound"]),
        load_window_s=[load_start, load_end],
    )
    health["client"] = result.health()
    if tokenizer_id == FALLBACK_TOKENIZER_ID:  # input lengths are the lab tokenizer's
        summary.update(input_lens_approximate=True, tokenizer_note=FALLBACK_NOTE)
    repo.store_summary(book.db, run_id, summary)
    if unit.server_check is not None:  # a limit the load shows was not applied
        repo.update_run(book.db, run_id, **effective.applied_columns(unit.server_check, health))
    cancelled = book.live.cancel.is_set() or (result.cancelled and died is None)
    verdict = ("engine_died", outcome.engine_words(died, log_tail)) if died else None
    suspect = [] if verdict or cancelled else outcome.find_suspect_reasons(result.records, summary)
    if verdict is None and not cancelled and not suspect:
        verdict = outcome.requests_verdict(result.records)
    if verdict is not None:
        kind, reason = verdict
        book.fail_run(
            run_id, kind, reason, outcome.HINTS[kind], log_tail=log_tail, health_json=health
        )
        book.progress("run_failed", {"run_id": run_id, "kind": kind, "reason": reason})
    elif suspect:  # measured, but numbers from outside that cannot be true: flagged, not done
        health["suspect"] = suspect
        book.finish_run(run_id, Status.SUSPECT, health_json=health, log_tail=log_tail)
        book.progress("run_suspect", {"run_id": run_id, "reasons": suspect})
    else:
        book.finish_run(
            run_id,
            Status.CANCELLED if cancelled else Status.DONE,
            health_json=health,
            log_tail=log_tail,
        )
    spool.release(spooled)  # every write of the run went through
    book.progress("measured", {"run_id": run_id, "summary": summary})
    return run_id


def _load_stopped(unit: MeasuredUnit, run_id: int, died: str | None) -> int:
    """The load generator was stopped before it sent a result: nothing was measured."""
    book = unit.book
    if died is None:
        book.finish_run(run_id, Status.CANCELLED)
        return run_id
    log_tail = unit.server.log_tail(200) if unit.server else None
    reason = outcome.engine_words(died, log_tail)
    hint = outcome.HINTS["engine_died"]
    book.fail_run(run_id, "engine_died", reason, hint, log_tail=log_tail)
    book.progress("run_failed", {"run_id": run_id, "kind": "engine_died", "reason": reason})
    return run_id
