"""How long does the Compare page take to draw in a big lab database?

Two cases, each a DB built once (bulk executemany in one transaction, per experiment; ITL lists
drawn from a small pool of compact JSON strings; 60 s of telemetry per run at the sampler's rates):
  small: 1,000 runs (50 experiments x 4 values x 5 repeats, 1,000 request rows a run), the 20 runs
         of experiment 1 preselected; target: first render at most 0.5 s;
  big:   10,000 runs (100 experiments x 5 values x 20 repeats, 200 request rows a run: 2 M rows,
         not 10 M), the 100 runs of experiment 1 preselected; target: first render under 2 s.
Each flag below takes one number per case (small, big). After one untimed render (the process's
imports: Altair, pandas' Styler, ...), the cases are rendered alternately (small, big, small, big,
...), each in a fresh AppTest session with its runs preselected (?runs=...), and the first render
of each session is timed; the medians decide. The machine may be noisy: compare medians.

    .venv/bin/python benchmarks/compare_page_speed.py [--keep DIR] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from store import open_db  # noqa: E402
from store.queries import RUN_COLUMNS  # noqa: E402
from tuning.compare import stats  # noqa: E402

ALL_VALUES = (2, 8, 32, 128, 512, 1024, 2048, 4096)
OUTPUT_LEN = 16
SAMPLE_SECONDS = 60
WORKLOAD = {
    "num_requests": 1000,
    "concurrency": 32,
    "input_len": 128,
    "output_len": OUTPUT_LEN,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}


def _summary(
    start: np.ndarray, ttft: np.ndarray, end: np.ndarray, itl_means: np.ndarray, duration: float
) -> dict[str, Any]:
    """The summary columns the runner would store, computed with numpy (vLLM's definitions)."""
    e2el = end - start
    tpot = (e2el - ttft) / (OUTPUT_LEN - 1)
    out: dict[str, Any] = {
        "completed": int(start.size),
        "failed": 0,
        "duration": duration,
        "total_input_tokens": int(start.size * 128),
        "total_output_tokens": int(start.size * OUTPUT_LEN),
        "request_throughput": start.size / duration,
        "output_throughput": start.size * OUTPUT_LEN / duration,
        "total_token_throughput": start.size * (128 + OUTPUT_LEN) / duration,
    }
    for name, vals in (("ttft", ttft), ("tpot", tpot), ("itl", itl_means), ("e2el", e2el)):
        q = np.percentile(vals, [50, 90, 99]) * 1000
        out[f"mean_{name}_ms"] = float(vals.mean() * 1000)
        out[f"median_{name}_ms"], out[f"p90_{name}_ms"], out[f"p99_{name}_ms"] = map(float, q)
    return out


@dataclass(frozen=True)
class Case:
    """One DB shape and the runs of experiment 1 preselected on the page."""

    name: str
    experiments: int
    values: tuple[int, ...]
    repeats: int
    requests: int  # request rows a run
    target_s: float
    strict: bool  # target met only below target_s (else at most target_s)

    @property
    def runs_per_experiment(self) -> int:
        return len(self.values) * self.repeats

    @property
    def runs(self) -> int:
        return self.experiments * self.runs_per_experiment

    @property
    def file_name(self) -> str:
        shape = f"{self.experiments}x{len(self.values)}x{self.repeats}-{self.requests}"
        return f"lab-{shape}.db"

    @property
    def target_text(self) -> str:
        return f"{'<' if self.strict else '<='} {self.target_s:g} s"

    def met(self, seconds: float) -> bool:
        return seconds < self.target_s if self.strict else seconds <= self.target_s


def build(path: Path, case: Case) -> None:
    """The case's DB, one transaction; experiment 1's runs are ids 1..runs_per_experiment."""
    t0 = time.perf_counter()
    values, repeats, n_requests = case.values, case.repeats, case.requests
    db = open_db(path)
    conn = db.conn
    rng = np.random.default_rng(0)
    itl_pool = [
        json.dumps(
            [round(float(x), 4) for x in rng.gamma(4.0, 0.0025, OUTPUT_LEN - 1)],
            separators=(",", ":"),
        )
        for _ in range(256)
    ]
    # The columns the Compare page reads, plus the two it does not that a real run has.
    run_cols = [*RUN_COLUMNS, "log_tail", "origin"]
    run_rows: list[tuple[Any, ...]] = []
    req_rows: list[tuple[Any, ...]] = []
    sample_rows: list[tuple[Any, ...]] = []
    exp_rows = []
    counts = {"requests": 0, "samples": 0}

    def flush() -> None:
        """Rows go in per experiment (parents first), so memory stays flat."""
        conn.executemany(
            "insert into experiments (id, uid, name, param, values_json, repeats, "
            "status, phase, runs_total, runs_done, author, created_at) values "
            f"({','.join('?' * 12)})",
            exp_rows,
        )
        conn.executemany(
            f"insert into runs ({', '.join(run_cols)}) values ({','.join('?' * len(run_cols))})",
            run_rows,
        )
        conn.executemany(
            "insert into requests (run_id, idx, start_s, ttft_s, end_s, itl_json, "
            "prompt_tokens, output_tokens, ok, http_status) values "
            "(?,?,?,?,?,?,?,?,?,?)",
            req_rows,
        )
        conn.executemany(
            "insert into samples (run_id, t_s, series, label, value) values (?,?,?,?,?)",
            sample_rows,
        )
        counts["requests"] += len(req_rows)
        counts["samples"] += len(sample_rows)
        req_rows.clear()
        sample_rows.clear()

    conn.execute("begin")
    run_id = 0
    log_tail = "INFO vLLM API server ready\n" * 150  # ~4 kB per run, like a real tail
    workload_json = json.dumps({**WORKLOAD, "num_requests": n_requests}, sort_keys=True)
    runs_built = 0
    for e in range(1, case.experiments + 1):
        exp_rows.append(
            (
                e,
                f"exp-uid-{e}",
                f"max-num-seqs sweep {e}",
                "max-num-seqs",
                json.dumps(list(values)),
                repeats,
                "done",
                "done",
                len(values) * repeats,
                len(values) * repeats,
                "bench",
                f"2026-01-{1 + e % 28:02d}T00:00:00",
            )
        )
        seq = 0
        for rep in range(repeats):
            for value in values:
                run_id += 1
                slow = 1.0 + 0.002 * value
                n = n_requests
                start = np.sort(rng.uniform(0, 30, n))
                ttft = rng.gamma(4.0, 0.02 * slow, n)
                itl_idx = rng.integers(0, len(itl_pool), n)
                itl_means = np.array([0.01] * n) * slow
                end = start + ttft + itl_means * (OUTPUT_LEN - 1)
                duration = float(end.max())
                summary = _summary(start, ttft, end, itl_means, duration)
                summary.update(
                    peak_tree_rss_bytes=int(3e9 + value * 1e6),
                    peak_gpu_used_bytes=None,
                    peak_gpu_tree_bytes=None,
                    peak_kv_cache_usage_perc=min(1.0, 0.1 + value / 200),
                    preemptions=0,
                    prefix_cache_hit_rate=None,
                    achieved_concurrency=32.0,
                    steady_output_throughput=None,
                    client_bound=0,
                )
                summary_json = json.dumps({**summary, "load_window_s": [20.0, 20.0 + duration]})
                config = json.dumps({"max-num-seqs": value, "block-size": 16}, sort_keys=True)
                run = {
                    "id": run_id,
                    "uid": f"run-uid-{run_id}",
                    "experiment_id": e,
                    "seq": seq,
                    "repeat_index": rep,
                    "param": "max-num-seqs",
                    "value": str(value),
                    "config_json": config,
                    "workload_json": workload_json,
                    "workload_fingerprint": "fp-bench",
                    "engine": "embedded",
                    "vllm_version": "0.32.0",
                    "model": "tiny",
                    "backend": "cpu",
                    "hardware": "bench-box",
                    "status": "done",
                    "phase": "done",
                    "time_to_healthy_s": 10.0 + rng.random(),
                    "kv_cache_tokens": 65536,
                    "summary_json": summary_json,
                    "log_tail": log_tail,
                    "author": "bench",
                    "host": "bench-host",
                    "origin": "local",
                    "hidden": 0,
                    "started_at": "2026-01-01T00:00:00",
                    "finished_at": "2026-01-01T00:01:00",
                    **summary,
                }
                run_rows.append(tuple(run.get(c) for c in run_cols))
                seq += 1
                for i in range(n):
                    req_rows.append(
                        (
                            run_id,
                            i,
                            float(start[i]),
                            float(ttft[i]),
                            float(end[i]),
                            itl_pool[itl_idx[i]],
                            128,
                            OUTPUT_LEN,
                            1,
                            200,
                        )
                    )
                for k in range(SAMPLE_SECONDS * 10):
                    t = k / 10
                    sample_rows.append((run_id, t, "tree_rss_bytes", "", 3e9 * min(1, t / 15)))
                    if k % 5 == 0:
                        load = 1.0 if 20 <= t <= 50 else 0.0
                        sample_rows.append(
                            (
                                run_id,
                                t,
                                "kv_cache_usage_perc",
                                "",
                                load * min(1.0, 0.1 + value / 200),
                            )
                        )
                        sample_rows.append(
                            (run_id, t, "generation_tokens_total", "", max(0.0, t - 20) * 500)
                        )
                        sample_rows.append((run_id, t, "num_requests_running", "", 32 * load))
        flush()
        runs_built += len(run_rows)
        run_rows.clear()
        exp_rows.clear()
    conn.commit()
    conn.execute("analyze")
    conn.close()
    size = path.stat().st_size
    print(
        f"built {path}: {case.experiments} experiments x {len(values)} values x {repeats} "
        f"repeats = {runs_built:,} runs, {counts['requests']:,} request rows "
        f"({n_requests:,} a run), {counts['samples']:,} samples, "
        f"{size / 2**20:,.0f} MiB in {time.perf_counter() - t0:.1f} s"
    )


def render_first(db_path: Path, run_ids: list[int], slo: float | None) -> tuple[float, float]:
    """The first render of the Compare page in a fresh AppTest session, `run_ids` preselected:
    (wall seconds, this process's CPU seconds; the page runs in a thread of it, so on a busy
    machine CPU seconds show the page's own work)."""
    from streamlit.testing.v1 import AppTest

    # AppTest's bare mode warns once per session that it has no script context: noise here.
    logging.getLogger("streamlit.runtime.scriptrunner_utils.script_run_context").disabled = True
    os.environ["TUNING_LAB_DB"] = str(db_path)
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    at.query_params["runs"] = ",".join(map(str, run_ids))
    if slo:
        at.session_state["cmp_slo_ttft"] = slo
    # Each timed render starts as cold as a new selection's (a tree before the cache has none).
    cached = getattr(stats, "bootstrap_means", None)
    if cached is not None:
        cached.cache_clear()
    t0, c0 = time.perf_counter(), time.process_time()
    at.switch_page("app_pages/4_Compare.py").run()
    took, cpu = time.perf_counter() - t0, time.process_time() - c0
    if at.exception:
        raise RuntimeError(f"page raised: {at.exception}")
    table = next(df.value for df in at.dataframe if "metric" in df.value.columns)
    verdicts = [c for c in table.columns if c.startswith("verdict")]
    if len(verdicts) == 0 or len(table) == 0:
        raise RuntimeError("page drew no comparison table")
    return took, cpu


def cases(args: argparse.Namespace) -> list[Case]:
    out = []
    for i, (name, target, strict) in enumerate((("small", 0.5, False), ("big", 2.0, True))):
        n_values = args.values[i]
        if not 2 <= n_values <= len(ALL_VALUES):
            raise SystemExit(f"--values: between 2 and {len(ALL_VALUES)} values a case")
        out.append(
            Case(
                name,
                args.experiments[i],
                ALL_VALUES[:n_values],
                args.repeats[i],
                args.requests[i],
                target,
                strict,
            )
        )
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the DBs here")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved renders of each case")
    parser.add_argument("--slo", type=float, default=None, help="a TTFT SLO in ms (goodput)")
    two = {"nargs": 2, "type": int, "metavar": ("SMALL", "BIG")}
    parser.add_argument("--experiments", default=[50, 100], help="experiments in the DB", **two)
    parser.add_argument("--values", default=[4, 5], help="values an experiment", **two)
    parser.add_argument("--repeats", default=[5, 20], help="repeats a value", **two)
    parser.add_argument("--requests", default=[1000, 200], help="request rows a run", **two)
    args = parser.parse_args()
    home = args.keep or Path(tempfile.mkdtemp(prefix="compare-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    os.environ["TUNING_LAB_HOME"] = str(home)
    try:
        return _measure(home, cases(args), args)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


def _measure(home: Path, all_cases: list[Case], args: argparse.Namespace) -> int:
    paths = {}
    for case in all_cases:
        path = paths[case.name] = home / case.file_name
        if path.exists():
            print(f"reusing {path} ({case.runs:,} runs, {case.requests:,} request rows a run)")
        else:
            build(path, case)
    ids = {c.name: list(range(1, c.runs_per_experiment + 1)) for c in all_cases}
    first = all_cases[0]
    cold, _ = render_first(paths[first.name], ids[first.name], args.slo)
    print(f"process cold start (imports; not counted): {first.name} {cold:.2f} s")
    times: dict[str, list[float]] = {c.name: [] for c in all_cases}
    cpus: dict[str, list[float]] = {c.name: [] for c in all_cases}
    for r in range(args.rounds):
        for case in all_cases:
            took, cpu = render_first(paths[case.name], ids[case.name], args.slo)
            times[case.name].append(took)
            cpus[case.name].append(cpu)
            print(
                f"round {r + 1}: {case.name} ({len(ids[case.name])} runs) {took:.2f} s "
                f"(CPU {cpu:.2f} s)"
            )
    ok = True
    for case in all_cases:
        median = statistics.median(times[case.name])
        met = case.met(median)
        ok &= met
        print(
            f"RESULT {case.name}: {len(ids[case.name])} runs selected in a {case.runs:,}-run DB, "
            f"first render median {median:.2f} s over {args.rounds} fresh sessions "
            f"(min {min(times[case.name]):.2f}, max {max(times[case.name]):.2f}; CPU median "
            f"{statistics.median(cpus[case.name]):.2f} s); "
            f"target {case.target_text}: {'met' if met else 'NOT met'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
