"""How long does the Compare page take for 20 runs in a big lab database?

Builds a DB of 1,000 runs (50 experiments x 4 values x 5 repeats), 1,000,000 request rows and
about a million telemetry samples (bulk executemany inside one transaction, ITL lists drawn from
a small pool of compact JSON strings), then renders pages/4_Compare.py through AppTest with the
20 runs of one experiment preselected (?runs=...), and prints the time of each render.
Target: under 2 s for a warm render (the first render in a process also imports Altair, pandas'
Styler and friends).

    .venv/bin/python benchmarks/compare_page_speed.py [--keep DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from store import open_db  # noqa: E402
from store.queries import RUN_COLUMNS  # noqa: E402

EXPERIMENTS = 50
VALUES = (2, 8, 32, 128)
REPEATS = 5
REQUESTS_PER_RUN = 1000
OUTPUT_LEN = 16
SAMPLE_SECONDS = 60
WORKLOAD = {
    "num_requests": REQUESTS_PER_RUN,
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


def build(path: Path) -> dict[str, Any]:
    """The big DB, in one transaction per table; returns the 20 run ids of experiment 1."""
    t0 = time.perf_counter()
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
            exp_rows[-1:],
        )
        conn.executemany(
            f"insert into runs ({', '.join(run_cols)}) values ({','.join('?' * len(run_cols))})",
            run_rows[-len(VALUES) * REPEATS :],
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
    workload_json = json.dumps(WORKLOAD, sort_keys=True)
    log_tail = "INFO vLLM API server ready\n" * 150  # ~4 kB per run, like a real tail
    for e in range(1, EXPERIMENTS + 1):
        exp_rows.append(
            (
                e,
                f"exp-uid-{e}",
                f"max-num-seqs sweep {e}",
                "max-num-seqs",
                json.dumps(list(VALUES)),
                REPEATS,
                "done",
                "done",
                len(VALUES) * REPEATS,
                len(VALUES) * REPEATS,
                "bench",
                f"2026-01-{1 + e % 28:02d}T00:00:00",
            )
        )
        seq = 0
        for rep in range(REPEATS):
            for value in VALUES:
                run_id += 1
                slow = 1.0 + 0.002 * value
                n = REQUESTS_PER_RUN
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
    conn.commit()
    conn.execute("analyze")
    conn.close()
    size = path.stat().st_size
    print(
        f"built {path}: {EXPERIMENTS} experiments, {len(run_rows):,} runs, "
        f"{counts['requests']:,} request rows, {counts['samples']:,} samples, "
        f"{size / 2**20:,.0f} MiB in {time.perf_counter() - t0:.1f} s"
    )
    return {"run_ids": [r[0] for r in run_rows if r[2] == 1]}


def render_times(db_path: Path, run_ids: list[int], repeat: int, slo: float | None) -> list[float]:
    """Render the Compare page `repeat` times in one AppTest (one session, like reruns)."""
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=120)
    at.run()
    at.query_params["runs"] = ",".join(map(str, run_ids))
    if slo:
        at.session_state["cmp_slo_ttft"] = slo
    times = []
    for i in range(repeat):
        t0 = time.perf_counter()
        if i == 0:
            at.switch_page("pages/4_Compare.py").run()
        else:
            at.run()
        times.append(time.perf_counter() - t0)
        if at.exception:
            raise RuntimeError(f"page raised: {at.exception}")
    charts = len(at.get("arrow_vega_lite_chart")) or len(at.get("vega_lite_chart"))
    table = next(df.value for df in at.dataframe if "metric" in df.value.columns)
    verdicts = [c for c in table.columns if c.startswith("verdict")]
    print(
        f"  page drew {charts} charts and a table of {len(table)} metrics x "
        f"{len(verdicts)} candidate sides"
    )
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep", type=Path, default=None, help="build (or reuse) the DB here")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    home = args.keep or Path(tempfile.mkdtemp(prefix="compare-bench-"))
    home.mkdir(parents=True, exist_ok=True)
    db_path = home / "lab.db"
    os.environ["TUNING_LAB_HOME"] = str(home)
    os.environ["TUNING_LAB_DB"] = str(db_path)
    try:
        return _measure(db_path, args)
    finally:
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)


def _measure(db_path: Path, args: argparse.Namespace) -> int:
    if db_path.exists() and args.keep:
        ids = list(range(1, len(VALUES) * REPEATS + 1))
        print(f"reusing {db_path}")
    else:
        ids = build(db_path)["run_ids"]
    print(f"Compare page, {len(ids)} runs preselected (?runs=...), no SLO:")
    plain = render_times(db_path, ids, args.repeat, None)
    print("  renders (s): " + ", ".join(f"{t:.2f}" for t in plain))
    print(f"Compare page, {len(ids)} runs, TTFT SLO (goodput from 20,000 request rows):")
    slo = render_times(db_path, ids, args.repeat, 120.0)
    print("  renders (s): " + ", ".join(f"{t:.2f}" for t in slo))
    warm = statistics.median(plain[1:] + slo[1:]) if args.repeat > 1 else plain[0]
    first = slo[0]
    print(
        f"RESULT first render in a fresh session {first:.2f} s (process cold start "
        f"{plain[0]:.2f} s), warm median {warm:.2f} s; target < 2 s: "
        f"{'met' if max(first, warm) < 2.0 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
