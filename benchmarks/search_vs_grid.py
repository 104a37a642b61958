"""Does `tuning search` find what a full grid finds, for at most half the runs?

On the lab's current engine (the embedded CPU vLLM by default), at concurrency 16:
1. the grid: `python -m tuning experiment --param max-num-seqs --values GRID`, one run a value;
   GRID defaults to the doubling grid 1,2,4,8,16,32 over the range 1:32 (the grid people sweep
   by hand; every integer would be 32 restarts, one to four minutes each on this 2-core machine
   when it is loaded; a finer grid is --grid 1,2,3,4,6,8,12,16,24,32);
2. the search: `python -m tuning search --param max-num-seqs --range 1:32` with `--budget-runs`
   half the grid's runs (a coarse pass of --coarse points, then refinement around the best);
3. the noise check, when the search chose another value than the grid's best: `experiment
   --values BEST,CHOSEN --repeats R` (interleaved) and the lab's own verdict (`compare`) on output
   throughput: `better`, `equivalent` or `undecided` (the interval includes 0) = within the noise;
   `worse` = the search missed.
Each step is one CLI command; with `--lock PATH` each is run under `flock PATH`, so the engine lock
is held for one step at a time. Run it again with the same --db to resume a stopped search.

    .venv/bin/python benchmarks/search_vs_grid.py --lock /tmp/engine.lock [--db PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PARAM = "max-num-seqs"
RANGE = "1:32"
GRID = "1,2,4,8,16,32"
METRIC = "output_throughput"


def lab(args: argparse.Namespace, *argv: str, engine: bool = True) -> Any:
    """`python -m tuning ARGV --db DB` (under flock when it starts the engine); its JSON."""
    cmd = [sys.executable, "-m", "tuning", *argv, "--db", str(args.db)]
    if engine and args.lock:
        cmd = ["flock", str(args.lock), *cmd]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def workload(args: argparse.Namespace) -> list[str]:
    return [
        "--concurrency",
        str(args.concurrency),
        "--num-requests",
        str(args.num_requests),
        "--input-len",
        str(args.length),
        "--output-len",
        str(args.length),
        "--start-timeout",
        "900",  # a loaded 2-core machine can take minutes to start the engine
    ]


def throughput_by_run(args: argparse.Namespace, exp_id: int) -> list[dict[str, Any]]:
    runs = lab(args, "runs", "--experiment", str(exp_id), "--json", engine=False)
    return [r for r in runs if r["status"] == "done"]


def grid_step(args: argparse.Namespace) -> tuple[list[dict[str, Any]], int]:
    exp = lab(
        args, "experiment", "--param", PARAM, "--values", args.grid, "--json", *workload(args)
    )
    return throughput_by_run(args, exp["experiment_id"]), len(exp["run_ids"])


def confirm_step(args: argparse.Namespace, best: int, chosen: int) -> dict[str, Any]:
    exp = lab(
        args,
        "experiment",
        "--param",
        PARAM,
        "--values",
        f"{best},{chosen}",
        "--repeats",
        str(args.confirm_repeats),
        "--json",
        *workload(args),
    )
    cmp = lab(args, "compare", "--experiment", str(exp["experiment_id"]), "--json", engine=False)
    rows = [r for r in cmp["rows"] if r["metric"] == METRIC]
    return {"baseline": rows[0], "candidate": rows[1]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, default=None, help="default: a new file under /tmp")
    ap.add_argument("--lock", type=Path, default=None, help="run each engine step under flock")
    ap.add_argument("--grid", default=GRID)
    ap.add_argument("--budget-runs", type=int, default=None, help="default: half the grid")
    ap.add_argument("--coarse", type=int, default=3)
    ap.add_argument("--confirm-repeats", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--num-requests", type=int, default=64)
    ap.add_argument("--length", type=int, default=64, help="input and output tokens a request")
    args = ap.parse_args(argv)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # each step as it ends
    if args.db is None:
        args.db = Path(tempfile.mkdtemp(prefix="search-vs-grid-")) / "lab.db"
    grid_values = [int(v) for v in args.grid.split(",")]
    budget = args.budget_runs or len(grid_values) // 2
    print(
        f"db {args.db}; workload: concurrency {args.concurrency}, {args.num_requests} requests, "
        f"{args.length} in / {args.length} out"
    )

    t0 = time.monotonic()
    grid, grid_runs = grid_step(args)
    t_grid = time.monotonic() - t0
    top = max(grid, key=lambda r: r[METRIC])
    print(
        f"\ngrid: experiment --param {PARAM} --values {args.grid} ({grid_runs} runs, "
        f"{t_grid / 60:.1f} min)"
    )
    for r in grid:
        mark = "  <- best" if r is top else ""
        print(f"  {PARAM} = {r['value']:>3}  {r[METRIC]:9,.0f} tok/s  (run {r['id']}){mark}")

    t0 = time.monotonic()
    found = lab(
        args,
        "search",
        "--param",
        PARAM,
        "--range",
        RANGE,
        "--objective",
        METRIC,
        "--budget-runs",
        str(budget),
        "--coarse",
        str(args.coarse),
        "--json",
        *workload(args),
    )
    t_search = time.monotonic() - t0
    print(
        f"\nsearch --range {RANGE} --budget-runs {budget} ({len(found['runs'])} runs, "
        f"{t_search / 60:.1f} min)"
    )
    for e in found["log"]:
        value = e.get(METRIC)
        shown = f"{value:9,.0f} tok/s" if value is not None else f"{e['status']:>15}"
        print(f"  step {e['step']}: {PARAM} = {e['value']:>3g}  {shown}  ({e['why']})")
    # the search's choice, else (undecided: too few runs to race) the value it leads with
    decision = found.get("decision") or {}
    pick = found["chosen"] if found["chosen"] is not None else decision.get("leader")
    chosen, best = int(pick), int(top["value"])
    outcome = decision.get("outcome", "chosen")
    print(f"  {outcome}: {PARAM} = {chosen} ({found['stopped']})")

    runs_ok = len(found["runs"]) * 2 <= grid_runs
    if chosen == best:
        within, detail = True, "the same value as the grid's best"
    else:
        t0 = time.monotonic()
        c = confirm_step(args, best, chosen)
        base, cand = c["baseline"], c["candidate"]
        verdict = cand["verdict"]
        within = verdict in ("better", "equivalent", "undecided")
        detail = (
            f"experiment --values {best},{chosen} --repeats {args.confirm_repeats} "
            f"({(time.monotonic() - t0) / 60:.1f} min): {base['mean']:,.0f} vs "
            f"{cand['mean']:,.0f} tok/s, change {cand['change_pct']:+.1f} % "
            f"(95 % CI {cand['ci_low_pct']:+.1f} ... {cand['ci_high_pct']:+.1f} %): {verdict}"
        )
    print(f"\nnoise check, search's {chosen} vs grid's best {best}: {detail}")
    print(
        f"runs: search {len(found['runs'])} vs grid {grid_runs} "
        f"({'at most half' if runs_ok else 'MORE than half'}); "
        f"within the noise: {'yes' if within else 'NO'}: {'PASS' if runs_ok and within else 'FAIL'}"
    )
    return 0 if runs_ok and within else 1


if __name__ == "__main__":
    sys.exit(main())
