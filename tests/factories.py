"""Synthetic labs for the tests: one set of builders, written through store.repo the way the
runner writes, so every test seeds its DB the same way and says only what differs (options, not
copies of a seeder)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from core.clock import now_iso
from core.records import NewExperiment, RequestRecord, SampleRow
from store import connect, repo
from tuning.cli.bench import add_bench_arguments
from tuning.compare.present import VERDICT_LABEL
from tuning.engine.embedded import TINY_MODEL_SHAPE
from tuning.engine.identity import engine_identity
from tuning.engine.params import format_value
from tuning.engine.spec import EngineSpec
from tuning.experiment.plan import plan_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.metrics import summarize
from tuning.measure.traffic.workload import Workload

WORKLOAD: dict[str, Any] = {
    "num_requests": 24,
    "concurrency": 8,
    "input_len": 64,
    "output_len": 16,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}
BASE_CONFIG: dict[str, Any] = {"block-size": 16, "enforce-eager": True}
FAILED_VALUE = 64  # the value whose server start fails (out of KV memory) in a seeded lab
# Secrets planted in one run the way a careless setup could leak them; none may leave the lab.
SECRET_ENV = "hf_canaryEnvToken1234567890"
SECRET_ARGV = "sk-canary-argv-0123456789"
SECRET_LOG = "sk-canary-log-9876543210"
SECRET_URL = "canaryUrlPassw0rd"
SECRETS = (SECRET_ENV, SECRET_ARGV, SECRET_LOG, SECRET_URL)
# What every seeded run shares: where it ran, and how a start that failed failed.
ENGINE_FIELDS = {
    "workload_fingerprint": "fp-seeded",
    "engine": "embedded-cpu",
    "vllm_version": "0.32.0",
    "model": "tiny",
    "backend": "cpu",
}
OOM = {
    "status": "failed",
    "phase": "failed",
    "failure_kind": "oom",
    "failure_reason": "not enough KV cache memory",
    "failure_hint": "lower max-num-seqs or raise the KV space",
}
ENGINE_PYTHON = "/home/ada/.engine/venv/bin/python"
ENGINE_MODEL = "/home/ada/.engine/tiny-llama"
API_SERVER = "vllm.entrypoints.openai.api_server"
# The embedded engine's tiny-llama config (tuning.engine.embedded.build_tiny_model):
# 2 x 2 x 4 x 64 x 2 B = 2,048 B of KV cache a token.
TINY_MODEL: dict[str, Any] = {**TINY_MODEL_SHAPE, "torch_dtype": "bfloat16", "vocab_size": 860}


def workload(**overrides: Any) -> dict[str, Any]:
    """The stored workload dict (as `Workload.to_dict` writes it) with some fields changed."""
    return {**WORKLOAD, **overrides}


def load_workload(n: int = 12, c: int = 4, out: int = 6, warm: int = 0, **kw: Any) -> Workload:
    """A small Workload for the load generator: n requests at concurrency c, 4-token prompts."""
    return Workload(
        num_requests=n, concurrency=c, input_len=4, output_len=out, num_warmups=warm, **kw
    )


def prompts_for(w: Workload, special: dict[int, str] | None = None) -> list[str]:
    """Warm-ups are 'warm-i', measured prompts 'req-i'; `special` puts the fake's markers in
    measured ones."""
    out = [f"warm-{i}" for i in range(w.warmups)] + [f"req-{i}" for i in range(w.num_requests)]
    for i, text in (special or {}).items():
        out[w.warmups + i] = text
    return out


def bench_args(
    base_url: str, out: Path, *extra: str, model: str = "fake-model"
) -> argparse.Namespace:
    """`tuning bench` parsed: 9 requests at concurrency 3, 12 tokens in, 5 out, result JSON to
    `out`; `extra` flags last (a repeated flag wins). SystemExit where argparse refuses them."""
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    argv = ["--base-url", base_url, "--model", model, "--concurrency", "3", "--num-requests", "9"]
    argv += ["--input-len", "12", "--output-len", "5", "--out", str(out), *extra]
    return parser.parse_args(argv)


# --------------------------------------------------------------------------------------------
# Requests and samples of one measured run
# --------------------------------------------------------------------------------------------


def _default_ttft(value: int) -> float:
    return 0.05 + value / 1000


def _default_tpot(value: int) -> float:
    return 0.004 * (1 + value / 32)


@dataclass(frozen=True)
class Load:
    """What each measured run of a seeded lab looks like: request timings per parameter value and
    the telemetry around them (a warm-up, the load, a drain)."""

    ttft_s: Callable[[int], float] = _default_ttft
    tpot_s: Callable[[int], float] = _default_tpot
    ttft_jitter: float = 0.05
    failed_requests: tuple[int, ...] = (5,)
    duration_s: float = 12.0
    period_s: float = 0.25
    warmup_s: float = 3.0
    queue: bool = True  # num_requests_running/waiting samples
    processes: bool = True  # a per-process RSS row (EngineCore) next to the tree's


LOAD = Load()


def record(
    index: int,
    start: float,
    ttft: float | None,
    itl: Sequence[float],
    out: int | None,
    prompt: int | None,
    *,
    ok: bool = True,
    kind: str | None = None,
    error: str = "x",
    http_status: int | None = None,
) -> RequestRecord:
    """One request as the client records it; it ends after its first token and every gap."""
    return RequestRecord(
        index=index,
        start=start,
        ttft=ttft,
        end=None if ttft is None else start + ttft + sum(itl),
        itl=list(itl),
        prompt_tokens=prompt,
        output_tokens=out,
        ok=ok,
        http_status=http_status,
        error_kind=None if ok else kind,
        error=None if ok else error,
    )


def records(
    rng: np.random.Generator,
    wl: dict[str, Any],
    ttft_s: float,
    tpot_s: float,
    *,
    ttft_jitter: float = 0.05,
    failed: Sequence[int] = (),
) -> list[RequestRecord]:
    """One record per request of the workload, started 40 ms apart; the indices in `failed` end
    with an HTTP 500 (no timings, no tokens)."""
    out = []
    n_itl = wl["output_len"] - 1
    for i in range(wl["num_requests"]):
        ttft = ttft_s * (1 + rng.normal(0, ttft_jitter))
        itl = [float(x) for x in np.abs(rng.normal(tpot_s, tpot_s * 0.1, n_itl))]
        ok = i not in failed
        out.append(
            record(
                i,
                i * 0.04,
                ttft if ok else None,
                itl if ok else [],
                wl["output_len"] if ok else None,
                wl["input_len"],
                ok=ok,
                kind="http",
                error="HTTP 500: engine overloaded",
                http_status=200 if ok else 500,
            )
        )
    return out


def samples(load: Load, kv_peak: float, rss: float) -> list[SampleRow]:
    """Telemetry of one run: memory climbing over the warm-up, KV use and the queue during the
    load, generated tokens counting up; `load.period_s` apart."""
    rows = []
    end = load.duration_s - 1
    for k in range(round(load.duration_s / load.period_s)):
        t = k * load.period_s
        busy = 1.0 if load.warmup_s <= t <= end else 0.0
        rows.append(SampleRow(t, "tree_rss_bytes", rss * min(1.0, t / load.warmup_s), ""))
        if load.processes:
            rows.append(SampleRow(t, "tree_rss_bytes", rss * 0.1, "EngineCore:4242"))
        rows += [
            SampleRow(t, "kv_cache_usage_perc", kv_peak * busy),
            SampleRow(t, "generation_tokens_total", max(0.0, t - load.warmup_s) * 250),
        ]
        if load.queue:
            rows += [
                SampleRow(t, "num_requests_running", 8 * busy),
                SampleRow(t, "num_requests_waiting", 1 * busy),
            ]
    return rows


# --------------------------------------------------------------------------------------------
# Experiments and runs, written through store.repo
# --------------------------------------------------------------------------------------------


def engine_json(*, secrets: bool = False, model: str = ENGINE_MODEL) -> dict[str, Any]:
    """The embedded engine as an experiment stores it; `model` a folder that exists (e.g. the
    `tiny_model` fixture) for runs reuse may match: a model whose config.json cannot be read
    here is an unknown part of a run's identity."""
    env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    if secrets:
        env["HF_TOKEN"] = SECRET_ENV
    return {
        "name": "embedded-cpu",
        "command": [ENGINE_PYTHON, "-m", API_SERVER],
        "model": model,
        "served_model_name": "tiny",
        "backend": "cpu",
        "env": env,
        "vllm_version": "0.32.0",
    }


def add_experiment(
    db: Any,
    *,
    values: Sequence[Any],
    param: str = "max-num-seqs",
    repeats: int = 1,
    status: str = "done",
    name: str | None = None,
    **fields: Any,
) -> int:
    """An experiment row; its counters follow its status unless `fields` say otherwise."""
    total = len(values) * repeats
    row: dict[str, Any] = {
        "name": name or f"{param} = {', '.join(map(str, values))}",
        "param": param,
        "values_json": list(values),
        "repeats": repeats,
        "config_json": BASE_CONFIG,
        "workload_json": WORKLOAD,
        "model": "tiny",
        "status": status,
        "phase": status,
        "runs_total": total,
        "runs_done": total if status == "done" else 0,
        "author": "ada",
        **fields,
    }
    return repo.create_experiment(db, NewExperiment(param=row.pop("param")), **row)


def _argv(config: dict[str, Any], secret: bool) -> list[str]:
    argv = [ENGINE_PYTHON, "-m", API_SERVER, "--model", ENGINE_MODEL]
    argv += ["--host", "127.0.0.1", "--port", "40123"]
    for key, value in config.items():
        argv += [f"--{key}"] if value is True else [f"--{key}", str(value)]
    return argv + (["--api-key", SECRET_ARGV] if secret else [])


def add_run(
    db: Any,
    experiment_id: int,
    *,
    seq: int,
    value: int,
    rng: np.random.Generator,
    repeat: int = 0,
    param: str = "max-num-seqs",
    status: str = "done",
    wl: dict[str, Any] = WORKLOAD,
    load: Load = LOAD,
    hardware: str = "cpu-test",
    author: str = "ada",
    host: str = "box-a",
    secrets: bool = False,
    log_path: str | None = None,
) -> int:
    """One run as the runner leaves it. `done`: requests, samples and a stored summary; `failed`: a
    start failure (out of KV memory) with its log tail; `running`: requests and samples so far.
    `secrets` plants the canaries (argv, env; a failed run's log tail and base URL). Its engine
    identity is the experiment's engine's, as the runner stores it (tuning.engine.identity)."""
    config = {**BASE_CONFIG, param: value}
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", **({"HF_TOKEN": SECRET_ENV} if secrets else {})}
    rid = repo.create_run(
        db,
        experiment_id=experiment_id,
        seq=seq,
        repeat_index=repeat,
        param=param,
        value=str(value),
        config_json=config,
        workload_json=wl,
        **ENGINE_FIELDS,
        engine_identity_json=_identity(db, experiment_id),
        hardware=hardware,
        hardware_json={"summary": hardware, "cpus": 2},
        argv_json=_argv(config, secrets),
        env_json=env,
        log_path=log_path or f"/home/{author}/lab/logs/experiment-{experiment_id}/run-{seq}.log",
        server_pid=5000 + seq,
        started_at=now_iso(),
        author=author,
        host=host,
        status="running",
        phase="running",
    )
    if status == "failed":
        _fail_start(db, rid, secrets)
        return rid
    recs = records(
        rng,
        wl,
        load.ttft_s(value),
        load.tpot_s(value),
        ttft_jitter=load.ttft_jitter,
        failed=load.failed_requests,
    )
    repo.insert_requests(db, rid, recs)
    repo.insert_samples(db, rid, samples(load, 0.2 + value / 100, 1.2 * 2**30))
    if status == "done":
        _finish(db, rid, recs, value, load)
    return rid


def _identity(db: Any, experiment_id: int) -> dict[str, Any] | None:
    """The engine identity the runner stores on a run of this experiment (None: attached)."""
    row = db.execute("select engine_json from experiments where id = ?", [experiment_id]).fetchone()
    engine = json.loads(row[0]) if row and row[0] else None
    return engine_identity(EngineSpec(**engine)) if engine else None


def _fail_start(db: Any, rid: int, secrets: bool) -> None:
    tail = "INFO starting\nERROR: KV cache needs 3 GiB, 1 GiB available\n"
    if secrets:
        tail += f"DEBUG request headers: Authorization: Bearer {SECRET_LOG}\n"
    repo.update_run(
        db,
        rid,
        **OOM,
        log_tail=tail,
        finished_at=now_iso(),
        base_url=f"http://ada:{SECRET_URL}@127.0.0.1:8000/v1" if secrets else None,
    )


def _finish(db: Any, rid: int, recs: list[RequestRecord], value: int, load: Load) -> None:
    summary = summarize(recs, 2.0 + value / 100)
    summary.update(
        peak_tree_rss_bytes=int(1.2 * 2**30),
        peak_kv_cache_usage_perc=0.2 + value / 100,
        preemptions=0,
        load_window_s=[load.warmup_s, load.duration_s - 1],
    )
    repo.store_summary(db, rid, summary)
    repo.update_run(
        db,
        rid,
        status="done",
        phase="done",
        time_to_healthy_s=9.5,
        kv_cache_tokens=8192,
        block_size=16,
        max_concurrency=4.0,
        startup_json={"kv_cache_tokens": 8192, "reused_server": False},
        health_json={"verdict": "ok", "client": {"lag_ms": 1.0}},
        log_tail="INFO Application startup complete.\n",
        finished_at=now_iso(),
    )


def seed_lab(
    path: Path,
    *,
    author: str = "ada",
    host: str = "box-a",
    hardware: str = "cpu-test",
    param: str = "max-num-seqs",
    values: tuple[int, ...] = (2, 16),
    repeats: int = 2,
    with_failed: bool = True,
    with_secrets: bool = True,
    seed: int = 7,
    name: str | None = None,
    wl: dict[str, Any] = WORKLOAD,
    load: Load = LOAD,
    engine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One finished experiment over `param`: values x repeats measured runs (repeats interleaved)
    with request rows and samples, plus (optionally) a value whose start failed with a log tail,
    and (optionally) secrets planted where a careless setup leaks them. Returns the ids. `engine`
    replaces `engine_json(...)` (e.g. a model folder that exists, for reuse)."""
    all_values = list(values) + ([FAILED_VALUE] if with_failed else [])
    rng = np.random.default_rng(seed)
    with connect(path) as db:
        exp = add_experiment(
            db,
            values=all_values,
            param=param,
            repeats=repeats,
            name=name,
            workload_json=wl,
            engine_json=engine or engine_json(secrets=with_secrets),
            runner_pid=4321,
            author=author,
            host=host,
            started_at=now_iso(),
            finished_at=now_iso(),
            notes="baseline sweep; see run 1",
            tags="cpu,sweep",
        )
        run_ids = []
        for seq, (rep, value) in enumerate((r, v) for r in range(repeats) for v in all_values):
            failed = with_failed and value == FAILED_VALUE
            run_ids.append(
                add_run(
                    db,
                    exp,
                    seq=seq,
                    value=value,
                    rng=rng,
                    repeat=rep,
                    param=param,
                    status="failed" if failed else "done",
                    wl=wl,
                    load=load,
                    hardware=hardware,
                    author=author,
                    host=host,
                    secrets=with_secrets and (seq == 0 or failed),
                )
            )
    return {"experiment_id": exp, "run_ids": run_ids}


def seed_clean_lab(
    path: Path, author: str = "ada", host: str = "box-a", **options: Any
) -> dict[str, Any]:
    """A clean sweep (no failed start, no planted secrets), e.g. a teammate's lab."""
    return seed_lab(
        path, author=author, host=host, with_failed=False, with_secrets=False, **options
    )


def plan_attached(
    db_path: Path,
    param: str = "concurrency",
    values: Sequence[int] = (1,),
    wl: Workload | None = None,
    base_url: str = "http://127.0.0.1:9/v1",
    **options: Any,
) -> int:
    """An experiment planned against a server the lab did not start (by default nothing listens
    there), serving model "m"; `options` go to plan_experiment (repeats, ...)."""
    return plan_experiment(
        db_path,
        ExperimentSpec.build(
            param=param,
            values=list(values),
            workload=wl or Workload(num_requests=4, concurrency=1, input_len=4, output_len=4),
            engine=None,
            base_url=base_url,
            model="m",
            **options,
        ),
    )


def run_row(
    rid: int,
    value: Any = 16,
    *,
    ttft: float = 100.0,
    tput: float = 1000.0,
    param: str = "max-num-seqs",
    status: str = "done",
    **over: Any,
) -> dict[str, Any]:
    """A run as `store.queries.load_runs` returns it, without a DB: for the comparison rules."""
    config = {"max-num-seqs": 16, "block-size": 32}
    wl = dict(WORKLOAD)
    if param in ("concurrency", "input-len", "output-len", "shared-prefix-len"):
        wl[param.replace("-", "_")] = value
    else:
        config[param] = value
    row = {
        "id": rid,
        "experiment_id": 1,
        "seq": rid,
        "repeat_index": 0,
        "param": param,
        "value": str(value),
        "status": status,
        "config": config,
        "workload": wl,
        "workload_fingerprint": "fp",
        "model": "tiny",
        "engine": "embedded",
        "vllm_version": "0.32.0",
        "hardware": "cpu",
        "completed": 64,
        "failed": 0,
        "duration": 10.0,
        "mean_ttft_ms": ttft,
        "median_ttft_ms": ttft * 0.9,
        "p99_ttft_ms": ttft * 2,
        "output_throughput": tput,
        "mean_tpot_ms": 5.0,
        "peak_tree_rss_bytes": 2 * 2**30,
        "kv_cache_tokens": 8192,
        "preemptions": 0,
    }
    row.update(over)
    return row


def undecided_and_better_runs() -> list[dict[str, Any]]:
    """Two runs a side (baseline ids 1, 2): throughput +14 % under ~20 % noise (undecided, leaning
    better), mean TTFT -50 % with little noise (better): a table with both kinds of row."""
    return [
        run_row(1, 16, tput=1000.0, ttft=100.0),
        run_row(2, 16, tput=1400.0, ttft=101.0),
        run_row(3, 64, tput=1100.0, ttft=50.0),
        run_row(4, 64, tput=1640.0, ttft=50.5),
    ]


# --------------------------------------------------------------------------------------------
# Experiments with chosen numbers (issue 25: prefer the default, inert knobs)
# --------------------------------------------------------------------------------------------


_CHOSEN = ("output_throughput", "mean_ttft_ms")


def _chosen_metrics(tput: float, ttft: float) -> dict[str, float]:
    return {"output_throughput": tput, "mean_ttft_ms": ttft, "mean_tpot_ms": 5.0}


def add_measured_experiment(
    db_path: Path,
    param: str,
    sides: Mapping[Any, Mapping[str, Sequence[float]]],
    fingerprint: str = "fp-a",
    **fields: Any,
) -> int:
    """One finished experiment over `param`: per value its runs' throughput and mean TTFT (and
    any other summary metric given, e.g. p99_ttft_ms), repeats interleaved, every run stored with
    a summary as the runner leaves it. `fields` go on the experiment row (repeats_auto=1,
    max_repeats=3: one that repeated until decided)."""
    values = list(sides)
    repeats = len(next(iter(sides.values()))["output_throughput"])
    with connect(db_path) as db:
        exp = repo.create_experiment(
            db,
            NewExperiment(param=param),
            name=f"{param} sweep",
            values_json=[format_value(v) for v in values],
            repeats=repeats,
            config_json={"block-size": 16},
            workload_json=WORKLOAD,
            engine_json=engine_json(),
            status="done",
            phase="done",
            **fields,
        )
        seq = 0
        for rep in range(repeats):
            for value in values:
                rid = repo.create_run(
                    db,
                    experiment_id=exp,
                    seq=seq,
                    repeat_index=rep,
                    param=param,
                    value=format_value(value),
                    config_json={"block-size": 16, param: value},
                    workload_json=WORKLOAD,
                    workload_fingerprint=fingerprint,
                    engine="embedded-cpu",
                    vllm_version="0.32.0",
                    model="tiny",
                    backend="cpu",
                    hardware="cpu-test",
                    status="running",
                )
                m = sides[value]
                summary = {
                    "completed": 24,
                    "failed": 0,
                    "duration": 2.0,
                    **_chosen_metrics(m["output_throughput"][rep], m["mean_ttft_ms"][rep]),
                    **{k: v[rep] for k, v in m.items() if k not in _CHOSEN},
                }
                repo.store_summary(db, rid, summary)
                repo.update_run(db, rid, status="done", phase="done", kv_cache_tokens=8192)
                seq += 1
    return exp


def drifting_runs() -> list[dict[str, Any]]:
    """Two values in A B B A order over four rounds (baseline max-num-seqs = 16: runs 1 4 5 8),
    on a machine that loses 1 % of throughput and adds 1 ms of TTFT a run: the baseline's first
    run vs its last says -7 % and +7 %, and the order cancels the drift between the values."""
    order = [16, 32, 32, 16, 16, 32, 32, 16]
    return [
        run_row(
            rid,
            value,
            tput=1000.0 - 10.0 * (rid - 1),
            ttft=100.0 + (rid - 1),
            seq=rid - 1,
            started_at=f"2026-01-01T10:{rid:02d}:00+00:00",
        )
        for rid, value in enumerate(order, 1)
    ]


def seed_drifting_lab(path: Path) -> dict[str, Any]:
    """`seed_clean_lab` (values 2 and 16, four repeats) on a machine losing 1 % of output
    throughput a run, in run order: the baseline (value 2) runs first at 1000 tok/s and last at
    940 (-6 %)."""
    info = seed_clean_lab(path, values=(2, 16), repeats=4)
    with connect(path) as db:
        for i, rid in enumerate(info["run_ids"]):
            repo.update_run(
                db,
                rid,
                output_throughput=1000.0 - 10.0 * i,
                started_at=f"2026-01-01T10:{i:02d}:00+00:00",
            )
    return info


def plan_decision(recommended: bool = True) -> dict[str, Any]:
    """A plan's decision record as `run_plan` stores it (tuning.compare.decision.decide_pair):
    output throughput +21 % decided better over 2 runs a side (or, not `recommended`, the same
    change under noise: undecided), the guards not measured."""
    from tuning.compare.decision import decide_pair
    from tuning.compare.primaries import Primaries

    start = {"output_throughput": [1000.0, 1001.0]}
    final = {"output_throughput": [1210.0, 1211.0] if recommended else [1150.0, 1270.0]}
    decision = decide_pair(start, final, Primaries(), baseline="start", candidate="recommended")
    return decision.to_json()


def plan_result(
    search_ids: Sequence[int | None] = (None, None), recommended: bool = True
) -> dict[str, Any]:
    """A recommendation shaped as `run_plan` returns it (tuning.decide.search.plan): max-num-seqs
    then
    block-size, chosen 16 and 32; output throughput decided better, mean TTFT undecided; its
    decision record recommends it (or, not `recommended`, leaves the objective undecided)."""

    def search(param: str, rng: list[float], chosen: int, tput: float, runs: list[int]) -> dict:
        log = [
            {
                "step": i + 1,
                "value": float(v),
                "why": "coarse pass",
                "run_id": r,
                "status": "done",
                "failure_kind": None,
                "output_throughput": tput if v == chosen else tput / 2,
                "meets_slo": True,
            }
            for i, (v, r) in enumerate(zip((rng[0], chosen), runs, strict=True))
        ]
        return {
            "param": param,
            "range": rng,
            "objective": "output_throughput",
            "better": "higher",
            "slo_ms": {"ttft": 500.0},
            "search_key": f"k-{param}",
            "chosen": chosen,
            "chosen_objective": tput,
            "interval": None,
            "runs": runs,
            "start_limit": None,
            "stopped": "budget of 2 runs spent",
            "log": log,
            "baseline": {"concurrency": 4},
            "experiment_ids": runs,
        }

    def gain(key: str, label: str, unit: str, better: str, verdict: str, pct: float) -> dict:
        texts = {v: VERDICT_LABEL[v] for v in ("better", "undecided")}
        return {
            "metric": key,
            "label": label,
            "unit": unit,
            "better": better,
            "start_mean": 1000.0,
            "recommended_mean": 1000.0 * (1 + pct / 100),
            "change_pct": pct,
            "ci_low_pct": pct - 8.0,
            "ci_high_pct": pct + 8.0,
            "verdict": verdict,
            "verdict_text": f"{texts[verdict]} (95 % CI {pct - 8:+.1f} … {pct + 8:+.1f} %)",
            "more_runs_per_side": None,
            "runs_a_side": [2, 2],
            "not_applied": [],
        }

    first = {**search("max-num-seqs", [1.0, 64.0], 16, 1500.0, [1, 2]), "search_id": search_ids[0]}
    second = {**search("block-size", [16.0, 32.0], 32, 1800.0, [3, 4]), "search_id": search_ids[1]}
    second["baseline"] = {"max-num-seqs": 16, "concurrency": 4}
    gains = [
        gain("output_throughput", "output throughput", "tok/s", "higher", "better", 21.0),
        gain("mean_ttft_ms", "mean TTFT", "ms", "lower", "undecided", -3.0),
    ]
    return {
        "plan_key": "k-plan",
        "params": ["max-num-seqs", "block-size"],
        "objective": "output_throughput",
        "slo_ms": {"ttft": 500.0},
        "start": {"concurrency": 4},
        "recommended": {"max-num-seqs": 16, "block-size": 32, "concurrency": 4},
        "chosen": {"max-num-seqs": 16, "block-size": 32},
        "serve_command": "vllm serve m --max-num-seqs 16 --block-size 32",
        "start_command": "vllm serve m",
        "gain": gains[0],
        "gains": gains,
        "decision": plan_decision(recommended),
        "searches": [first, second],
        "evidence": {
            "search_runs": {"max-num-seqs": [1, 2], "block-size": [3, 4]},
            "search_experiments": {"max-num-seqs": [1, 2], "block-size": [3, 4]},
            "confirm_runs": {"start": [5, 8], "final": [6, 7]},
            "confirm_experiments": [5, 6, 7, 8],
        },
    }


def add_plan(
    db_path: Path, result: Mapping[str, Any] | None = None, seqs: tuple[int, int] = (1, 64)
) -> int:
    """A finished plan stored the way `run_plan` stores it (tuning.decide.search.plan_record), its
    result `plan_result()` unless given; another max-num-seqs range `seqs` is another plan (the
    same one again is a resume: the same row); returns the plan's id."""
    from tuning.decide.search.plan import PlanSpec
    from tuning.decide.search.plan_record import plan_recorded
    from tuning.decide.search.strategy import Space

    spec = PlanSpec(
        params=["max-num-seqs", "block-size"],
        spaces={"max-num-seqs": Space(*seqs, True), "block-size": Space(16, 32, True)},
        objective="output_throughput",
        workload=Workload(num_requests=8, concurrency=4, input_len=8, output_len=4),
        engine=None,
        slo_ms={"ttft": 500.0},
    )
    found = dict(result or plan_result())
    with plan_recorded(db_path, spec.key(), spec.to_json()) as keep:
        keep(found)
    return int(found["plan_id"])


def stream_interval_runs(chunk_b: float | None, chunk_c: float | None) -> list[dict[str, Any]]:
    """stream-interval 1 vs 16, two runs a side: ITL per chunk 7.4x longer, per token 53 % less."""

    def one(rid: int, value: int, itl: float, per_token: float, chunk: float | None) -> Any:
        return run_row(
            rid,
            value,
            param="stream-interval",
            mean_itl_ms=itl,
            p99_itl_ms=itl * 2,
            mean_itl_per_token_ms=per_token,
            mean_tpot_ms=per_token,
            mean_tokens_per_chunk=chunk,
        )

    return [
        one(1, 1, 10.0, 10.0, chunk_b),
        one(2, 1, 10.2, 10.2, chunk_b),
        one(3, 16, 74.0, 4.7, chunk_c),
        one(4, 16, 75.5, 4.8, chunk_c),
    ]


# --------------------------------------------------------------------------------------------
# A decision its own rule left undecided (issue 37: decide, don't guess)
# --------------------------------------------------------------------------------------------

# Three runs a side, repeated until decided (max 3 runs a value: looks at 2 and 3, each at
# alpha 0.025, Holm over 3 primaries): output throughput +14.3 %, which a plain 95 % interval
# over all runs calls better (it excludes no change) while the rule's looks leave it undecided;
# p99 TTFT and p99 TPOT unchanged under noise.
UNDECIDED_SIDES: dict[Any, dict[str, list[float]]] = {
    1: {
        "output_throughput": [1000.0, 1100.0, 1050.0],
        "mean_ttft_ms": [50.0, 51.0, 50.5],
        "p99_ttft_ms": [100.0, 110.0, 105.0],
        "p99_tpot_ms": [10.0, 11.0, 10.5],
    },
    16: {
        "output_throughput": [1150.0, 1250.0, 1200.0],
        "mean_ttft_ms": [50.2, 50.8, 50.4],
        "p99_ttft_ms": [104.0, 100.0, 108.0],
        "p99_tpot_ms": [10.4, 10.0, 10.8],
    },
}


def add_undecided_experiment(db_path: Path, *, store: bool = True) -> int:
    """A stream-interval experiment 1 vs 16 that repeated until decided and stopped at max_repeats
    with its objective undecided (`UNDECIDED_SIDES`); its decision record stored as the runner
    stores it when it ends (unless not `store`: a record made before m017 or still running)."""
    exp = add_measured_experiment(
        db_path, "stream-interval", UNDECIDED_SIDES, repeats_auto=1, max_repeats=3
    )
    if store:
        from tuning.experiment.decision import store_decision

        with connect(db_path) as db:
            store_decision(db, exp)
    return exp


FELL_BACK = "sleep mode failed: POST /sleep answered 500"


def give_resident(db: Any, experiment_id: int, fallback: str | None = FELL_BACK) -> dict[str, Any]:
    """Make a stored experiment's runs resident as its runner stores them (tuning.experiment.
    resident): each value's first run a fresh start, its others switched to; the check over them
    by the real rule; `fallback` its reason to have fallen back (None: it did not). The state."""
    from store import queries
    from tuning.compare.primaries import Primaries
    from tuning.experiment.resident_check import resident_check

    exp = queries.get_experiment(db, experiment_id)
    seen: set[str] = set()
    for run in queries.list_runs(db, experiment_id, include_hidden=True):
        mode = "switch" if str(run["value"]) in seen else "start"
        seen.add(str(run["value"]))
        repo.update_run(
            db, int(run["id"]), startup_json={**(run.get("startup") or {}), "resident": mode}
        )
    runs = queries.list_runs(db, experiment_id, include_hidden=True)
    state: dict[str, Any] = {"asked": "auto", "used": True, "restart_every": 3}
    state["starts"] = sum(1 for r in runs if (r.get("startup") or {}).get("resident") == "start")
    state["switches"] = sum(1 for r in runs if (r.get("startup") or {}).get("resident") == "switch")
    state["check"] = resident_check(runs, Primaries.of(exp).keys)
    if fallback:
        state["fallback"] = fallback
    repo.update_experiment(db, experiment_id, resident_json=state)
    return state
