"""The lab's CLI: everything the UI does, for scripts, tests and headless GPU boxes."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tuning.cli import compare as cli_dashboard
from tuning.cli import server as cli_server
from tuning.cli import share as cli_share
from tuning.settings import default_db_path


def _db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", type=Path, default=None, help=f"the lab's SQLite file (default {default_db_path()})"
    )


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--shared-prefix-len", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-warmups", type=int, default=None)
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    p.add_argument("--request-timeout", type=float, default=600.0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tuning", description="vLLM Tuning Lab: one variable at a time."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    engine = sub.add_parser("engine", help="the embedded CPU engine")
    everb = engine.add_subparsers(dest="verb", required=True)
    setup = everb.add_parser("setup", help="build the engine venv and the tiny model (idempotent)")
    setup.add_argument("--force", action="store_true")
    info = everb.add_parser("info", help="interpreter, vLLM version, model path")
    info.add_argument("--json", action="store_true")

    cli_server.add_arguments(sub)

    from tuning.bench import add_bench_arguments

    add_bench_arguments(
        sub.add_parser("bench", help="load only, against any running OpenAI-compatible server")
    )

    exp = sub.add_parser("experiment", help="run a one-parameter experiment in the foreground")
    exp.add_argument("--param", required=True)
    exp.add_argument("--values", required=True, help="comma-separated, e.g. 2,16")
    exp.add_argument(
        "--set",
        action="append",
        metavar="NAME=VALUE",
        help="baseline server parameter (repeatable)",
    )
    exp.add_argument("--repeats", type=int, default=1)
    exp.add_argument(
        "--base-url", default=None, help="attach to a running server (workload parameters only)"
    )
    exp.add_argument("--model", default=None)
    exp.add_argument("--name", default=None)
    exp.add_argument("--start-timeout", type=float, default=300.0)
    exp.add_argument("--json", action="store_true", help="print the run ids as JSON")
    add_workload_arguments(exp)
    _db_arg(exp)

    runx = sub.add_parser("run-experiment", help="(runner process) run a planned experiment")
    runx.add_argument("--id", type=int, required=True)
    _db_arg(runx)

    cancel = sub.add_parser("cancel", help="ask a running experiment to stop")
    cancel.add_argument("--id", type=int, required=True)
    _db_arg(cancel)

    cli_dashboard.add_arguments(sub)
    cli_share.add_arguments(sub)

    runs = sub.add_parser("runs", help="every run with its summary")
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--experiment", type=int, default=None)
    _db_arg(runs)
    return parser


def _engine_cmd(args: argparse.Namespace) -> int:
    from tuning.engine import EngineError, engine_info, setup_embedded

    if args.verb == "setup":
        try:
            setup_embedded(lambda line: print(line, flush=True), force=args.force)
        except EngineError as exc:
            print(f"engine setup failed: {exc}", file=sys.stderr)
            return 1
        return 0
    info = engine_info()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        for key, value in info.items():
            print(f"{key:18} {value}")
    return 0


def _workload_from(args: argparse.Namespace) -> Any:
    from tuning.workload import Workload

    return Workload(
        num_requests=args.num_requests,
        concurrency=args.concurrency,
        input_len=args.input_len,
        output_len=args.output_len,
        shared_prefix_len=args.shared_prefix_len,
        endpoint=args.endpoint,
        seed=args.seed,
        num_warmups=args.num_warmups,
        request_timeout_s=args.request_timeout,
    )


def _experiment_cmd(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from tuning.engine import current_spec
    from tuning.experiment.lock import RunnerBusy
    from tuning.experiment.plan import plan_experiment
    from tuning.experiment.runner import run_experiment
    from tuning.params import ParamError, parse_values
    from tuning.settings import load_settings

    settings = load_settings()
    db_path = args.db or default_db_path()
    try:
        values = parse_values(args.param, args.values)
        engine = None if args.base_url else current_spec(settings)
        exp_id = plan_experiment(
            db_path,
            param=args.param,
            values=values,
            workload=_workload_from(args),
            engine=engine,
            base_config=cli_server.parse_sets(args.set),
            repeats=args.repeats,
            base_url=args.base_url,
            model=args.model,
            name=args.name,
            author=settings.resolved_author(),
            host=settings.resolved_host(),
        )
    except (ParamError, ValueError) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    total = len(values) * max(1, args.repeats)
    bar = tqdm(total=total, desc=f"experiment {exp_id}", unit="run", file=sys.stderr)

    def progress(event: str, data: dict[str, Any]) -> None:
        if event == "phase":
            bar.set_postfix_str(str(data["phase"]))
        elif event == "run_done":
            bar.update(1)
        elif event == "run_failed":
            tqdm.write(
                f"run {data['run_id']} failed [{data['kind']}]: {data['reason']}", file=sys.stderr
            )

    try:
        run_ids = run_experiment(db_path, exp_id, progress, start_timeout=args.start_timeout)
    except RunnerBusy as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 3
    finally:
        bar.close()
    if args.json:
        print(json.dumps({"experiment_id": exp_id, "run_ids": run_ids}))
    else:
        print(f"experiment {exp_id}: runs {', '.join(map(str, run_ids))}")
    return 0


RUN_KEYS = (
    [
        "completed",
        "failed",
        "duration",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "output_throughput",
        "total_token_throughput",
    ]
    + [
        f"{s}_{m}_ms"
        for m in ("ttft", "tpot", "itl", "e2el")
        for s in ("mean", "median", "p90", "p99")
    ]
    + [
        "peak_tree_rss_bytes",
        "peak_gpu_used_bytes",
        "peak_gpu_tree_bytes",
        "peak_kv_cache_usage_perc",
        "preemptions",
    ]
)


def run_as_dict(run: dict[str, Any]) -> dict[str, Any]:
    summary = run.get("summary") or {}
    out = {
        "id": run["id"],
        "uid": run["uid"],
        "experiment_id": run["experiment_id"],
        "param": run["param"],
        "value": run["value"],
        "repeat": run["repeat_index"],
        "status": run["status"],
        "failure_kind": run["failure_kind"],
        "failure_reason": run["failure_reason"],
        "failure_hint": run["failure_hint"],
        "kv_cache_tokens": run["kv_cache_tokens"],
        "time_to_healthy_s": run["time_to_healthy_s"],
        "workload_fingerprint": run["workload_fingerprint"],
        "author": run.get("author"),
        "host": run.get("host"),
    }
    out["kv_capacity_tokens"] = run["kv_cache_tokens"]
    for key in RUN_KEYS:
        out[key] = summary.get(key)
    return out


def _runs_cmd(args: argparse.Namespace) -> int:
    from store import open_db, queries

    db = open_db(args.db or default_db_path())
    rows = [run_as_dict(r) for r in queries.list_runs(db, args.experiment, include_hidden=True)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'id':>4} {'exp':>4} {'param':22} {'value':>8} {'status':9} {'tok/s':>9} "
        f"{'TTFT ms':>8} {'TPOT ms':>8} {'fail':>4}"
    )
    for r in rows:

        def f(key: str, fmt: str = "{:.1f}") -> str:
            return fmt.format(r[key]) if isinstance(r[key], (int, float)) else "-"

        print(
            f"{r['id']:>4} {r['experiment_id']:>4} {r['param']:22} {r['value']:>8} "
            f"{r['status']:9} {f('output_throughput'):>9} {f('mean_ttft_ms'):>8} "
            f"{f('mean_tpot_ms'):>8} {f('failed', '{}'):>4}"
            + (f"  [{r['failure_kind']}]" if r["failure_kind"] else "")
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "engine":
        return _engine_cmd(args)
    if args.command == "server":
        return cli_server.run(args)
    if args.command == "bench":
        from tuning.bench import run_bench_command

        return run_bench_command(args)
    if args.command == "experiment":
        return _experiment_cmd(args)
    if args.command == "run-experiment":
        from tuning.experiment.runner import run_experiment

        run_experiment(args.db or default_db_path(), args.id)
        return 0
    if args.command == "cancel":
        from tuning.experiment.supervisor import cancel_experiment

        cancel_experiment(args.db or default_db_path(), args.id)
        return 0
    if args.command == "runs":
        return _runs_cmd(args)
    if args.command in cli_dashboard.COMMANDS:
        return cli_dashboard.run(args)
    if args.command in cli_share.COMMANDS:
        return cli_share.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
