"""`python -m tuning experiment|run-experiment|cancel|runs|bench`: experiments and their runs from a
shell, and the load alone against any running server."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from tuning.cli.args import add_db, db_path, refused
from tuning.cli.server import parse_sets

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

STALL_HELP = "seconds without data after a stream's first token before it counts as stalled"
COMMANDS = ("bench", "experiment", "run-experiment", "cancel", "runs")

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
# The numbers the `runs` table shows (besides failed requests).
_RUNS_TABLE = ("output_throughput", "mean_ttft_ms", "mean_tpot_ms")
# Columns of a run row that `runs --json` carries as they are.
RUN_COLUMNS = (
    "id",
    "uid",
    "experiment_id",
    "param",
    "value",
    "status",
    "failure_kind",
    "failure_reason",
    "failure_hint",
    "kv_cache_tokens",
    "time_to_healthy_s",
    "workload_fingerprint",
    "author",
    "host",
)


def add_workload_arguments(p: argparse.ArgumentParser) -> None:
    """The workload flags, named as `bench` names them (tuning.workload.workload_from_args)."""
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--input-len", type=int, default=64)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--shared-prefix-len", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--num-warmups", type=int, default=None)
    p.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--stall-timeout", type=float, default=60.0, help=STALL_HELP)


def add_arguments(sub: Subparsers) -> None:
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
    add_db(exp)
    for name, help_text in (
        ("run-experiment", "(runner process) run a planned experiment"),
        ("cancel", "ask a running experiment to stop"),
    ):
        p = sub.add_parser(name, help=help_text)
        p.add_argument("--id", type=int, required=True)
        add_db(p)
        if name == "run-experiment":
            p.add_argument(
                "--use-local-engine",
                action="store_true",
                help="for an imported (read-only) experiment: plan the same sweep as a new "
                "local experiment on this lab's engine and run it (the stored command never runs)",
            )
    runs = sub.add_parser("runs", help="every run with its summary")
    runs.add_argument("--json", action="store_true")
    runs.add_argument("--experiment", type=int, default=None)
    add_db(runs)


def _experiment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from tuning.engine import current_spec
    from tuning.experiment.lock import RunnerBusy
    from tuning.experiment.plan import plan_experiment
    from tuning.experiment.runner import run_experiment
    from tuning.params import ParamError, parse_values
    from tuning.settings import load_settings
    from tuning.workload import workload_from_args

    settings = load_settings()
    path = db_path(args)
    if args.base_url:
        from store import connect

        with connect(path):  # a damaged or newer DB is refused before the endpoint is asked
            pass
        if not endpoint_ready(args):
            return 1
    try:
        values = parse_values(args.param, args.values)
        exp_id = plan_experiment(
            path,
            param=args.param,
            values=values,
            workload=workload_from_args(args),
            engine=None if args.base_url else current_spec(settings),
            base_config=parse_sets(args.set),
            repeats=args.repeats,
            base_url=args.base_url,
            model=args.model,
            name=args.name,
            author=settings.resolved_author(),
            host=settings.resolved_host(),
        )
    except (ParamError, ValueError) as exc:
        return refused(str(exc))
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
        run_ids = run_experiment(path, exp_id, progress, start_timeout=args.start_timeout)
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


def endpoint_ready(args: argparse.Namespace) -> bool:
    """An attached endpoint answers before anything is planned: its model list and a one-token
    probe (the `openai` package), or a plain message about the key, the URL or the model name."""
    from tuning.loadgen.endpoint import EndpointError, check_endpoint, probe_endpoint

    try:
        check_endpoint(args.base_url, args.model)
        probe_endpoint(args.base_url, args.model, endpoint=args.endpoint)
    except EndpointError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return False
    return True


def run_as_dict(run: dict[str, Any]) -> dict[str, Any]:
    """A run row as `runs --json` prints it: its facts, then its summary's numbers."""
    summary = run.get("summary") or {}
    out = {key: run.get(key) for key in RUN_COLUMNS}
    out["repeat"] = run.get("repeat_index")
    out["kv_capacity_tokens"] = run.get("kv_cache_tokens")
    out.update({key: summary.get(key) for key in RUN_KEYS})
    return out


def _runs(args: argparse.Namespace) -> int:
    from store import StoreError, connect, queries
    from tuning.compare.present import fmt

    try:
        with connect(db_path(args), readonly=True) as db:
            runs = queries.list_runs(db, args.experiment, include_hidden=True)
    except StoreError as exc:
        return refused(str(exc))
    rows = [run_as_dict(r) for r in runs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'id':>4} {'exp':>4} {'param':22} {'value':>8} {'status':9} {'tok/s':>9} "
        f"{'TTFT ms':>8} {'TPOT ms':>8} {'fail':>4}"
    )
    for r in rows:
        tps, ttft, tpot = (fmt(r[k], spec="{:.1f}", none="-") for k in _RUNS_TABLE)
        print(
            f"{r['id']:>4} {r['experiment_id']:>4} {r['param']:22} {r['value']:>8} "
            f"{r['status']:9} {tps:>9} {ttft:>8} {tpot:>8} {fmt(r['failed'], 'count', none='-'):>4}"
            + (f"  [{r['failure_kind']}]" if r["failure_kind"] else "")
        )
    return 0


def _run_experiment(args: argparse.Namespace) -> int:
    """Run a planned experiment; an imported one is refused unless --use-local-engine, which
    plans its sweep anew on this lab's engine and runs that."""
    from store import StoreError, connect, queries
    from tuning.engine import current_spec
    from tuning.experiment.plan import ImportedExperimentError, is_imported, plan_rerun
    from tuning.experiment.runner import run_experiment
    from tuning.settings import load_settings

    path, exp_id = db_path(args), args.id
    if args.use_local_engine:
        try:
            with connect(path, readonly=True) as db:
                imported = is_imported(queries.get_experiment(db, exp_id))
            if imported:
                settings = load_settings()
                exp_id = plan_rerun(
                    path,
                    exp_id,
                    current_spec(settings),
                    author=settings.resolved_author(),
                    host=settings.resolved_host(),
                )
                print(f"experiment {args.id} is imported: running it as experiment {exp_id}")
        except (StoreError, ValueError) as exc:
            return refused(str(exc))
    try:
        run_experiment(path, exp_id)
    except ImportedExperimentError as exc:
        return refused(str(exc))
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch one of COMMANDS (args.command)."""
    if args.command == "bench":
        from tuning.bench import run_bench_command

        return run_bench_command(args)
    if args.command == "experiment":
        return _experiment(args)
    if args.command == "runs":
        return _runs(args)
    if args.command == "run-experiment":
        return _run_experiment(args)
    from tuning.experiment.supervisor import cancel_experiment

    cancel_experiment(db_path(args), args.id)
    return 0
