"""`tuning-lab experiment|run-experiment|cancel|runs|bench`: experiments and their runs from a
shell, and the load alone against any running server."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.failure_kinds import failure_words
from core.status import Status
from tuning.cli.args import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    add_db,
    add_progress,
    add_yes,
    db_path,
    printable,
    refused,
    say,
    show_progress,
)
from tuning.cli.fleet import add_fleet_arguments, fleet_options
from tuning.cli.parser import prog_name, rename_flag
from tuning.cli.primaries import add_primary_arguments, primaries_from_args, primaries_given
from tuning.cli.reuse import add_reuse_arguments, offer_reuse
from tuning.experiment.spec import ExperimentSpec, repeats_from_args

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers
    from tuning.experiment.runner import Executor

COMMANDS = ("bench", "experiment", "run-experiment", "cancel", "runs", "reap")
# Exit codes of `experiment` and `run-experiment` by the experiment's final status (EXIT_CODES):
# another runner holding the experiment is a refusal like any other (it was 3).
EXIT_BUSY = EXIT_REFUSED


def add_arguments(sub: Subparsers) -> None:
    from tuning.cli.bench import add_bench_arguments

    add_bench_arguments(
        sub.add_parser("bench", help="load only, against any running OpenAI-compatible server")
    )
    exp = sub.add_parser("experiment", help="run a one-parameter experiment in the foreground")
    ExperimentSpec.add_cli_args(exp)
    exp.add_argument(
        "--resume",
        type=int,
        default=None,
        metavar="ID",
        help="run what experiment ID has left (its finished runs are kept); no --param/--values; "
        "with --max-repeats/--budget-minutes, one that repeats until decided goes on under "
        "these limits (the budget counts its runs so far)",
    )
    exp.add_argument(
        "--start-timeout",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="how long each server may take to become healthy before its run fails",
    )
    exp.add_argument("--json", action="store_true", help="print the run ids as JSON")
    add_progress(exp)
    add_yes(exp)
    add_primary_arguments(exp)
    add_fleet_arguments(exp)
    add_reuse_arguments(exp)
    add_db(exp)
    for name, help_text in (
        ("run-experiment", None),  # the runner process's own command: works, hidden from help
        ("cancel", "ask a running experiment to stop"),
    ):
        # a command added without help= is left out of the command list
        p = sub.add_parser(name, help=help_text) if help_text else sub.add_parser(name)
        p.add_argument(
            "--experiment",
            type=int,
            required=True,
            metavar="ID",
            help="the experiment (its id, as `runs` and `experiment` print it)",
        )
        rename_flag(p, "--id", "--experiment")
        add_db(p)
        if name == "run-experiment":
            p.add_argument(
                "--use-local-engine",
                action="store_true",
                help="for an imported (read-only) experiment: plan the same sweep as a new "
                "local experiment on this lab's engine and run it (the stored command never runs)",
            )
    reap = sub.add_parser(
        "reap", help="mark experiments whose runner died failed and stop what they left"
    )
    reap.add_argument("--json", action="store_true", help="the reaped experiments as JSON")
    add_db(reap)
    runs = sub.add_parser("runs", help="every run with its summary")
    runs.add_argument("--json", action="store_true", help="the runs as one JSON list")
    runs.add_argument(
        "--experiment",
        type=int,
        default=None,
        metavar="ID",
        help="only this experiment's runs (refused when there is no such experiment)",
    )
    add_db(runs)


def _experiment(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from store import StoreError, connect
    from tuning.cli.estimate import experiment_estimate, left_line, load_advice
    from tuning.decide.fleet import FleetError
    from tuning.engine.flags.catalog import CatalogError
    from tuning.engine.params import ParamError
    from tuning.experiment.plan import plan_experiment
    from tuning.experiment.supervisor import ResumeRefused, prepare_resume, raise_limits, reap

    path = db_path(args)
    try:  # flags that need no server or DB are refused first, with nothing written
        repeats_from_args(args, resuming=args.resume is not None)
        primaries = primaries_from_args(args)
        if args.resume is not None and primaries_given(args):
            raise ValueError("--resume takes the experiment as planned: no --objective or --guard")
        fleet = None if args.resume is not None else fleet_options(args)
    except (ValueError, FleetError) as exc:
        return refused(str(exc))
    with connect(path):  # a damaged or newer DB is refused before the endpoint is asked
        pass
    if args.base_url and not endpoint_ready(args):
        return 1
    _say_reaped(reap(path))
    reuse = None
    try:
        if args.resume is not None:
            if args.param or args.values or args.reuse or args.no_reuse:
                raise ValueError("--resume takes the experiment as planned: no --param or --reuse")
            exp_id = args.resume
            if args.max_repeats is not None or args.budget_minutes is not None:
                raise_limits(path, exp_id, args.max_repeats, args.budget_minutes)
            if not prepare_resume(path, exp_id):
                say(f"experiment {exp_id}: nothing to resume, every run has finished")
                return 0
        else:
            spec = ExperimentSpec.from_cli_args(args, path)
            if spec.warning:
                say(f"warning: --repeats {spec.repeats}: {spec.warning}", file=sys.stderr)
            exp_id = plan_experiment(path, spec)
            from tuning.decide.fleet import attach_fleet
            from tuning.experiment.primaries import declare

            declare(path, exp_id, primaries)  # what decides it, before it runs
            attach_fleet(path, exp_id, fleet)
            reuse = offer_reuse(args, path, exp_id)  # earlier identical runs: asked, never silent
    except (ParamError, ValueError, ResumeRefused, StoreError, FleetError, CatalogError) as exc:
        return refused(str(exc))
    estimate = experiment_estimate(path, exp_id)  # one line on stderr before anything starts
    advised: dict[str, Any] = {}
    if args.resume is not None and (advice := load_advice(path, exp_id)):  # its runs so far
        say(advice.line(), file=sys.stderr)
        advised.update(advice.to_json())
    # Drawn on a terminal only (or with --progress): redirected stderr gets lines, never `\r`.
    bar = tqdm(
        desc=f"experiment {exp_id}",
        unit="run",
        file=sys.stderr,
        disable=not show_progress(args, sys.stderr),
    )

    def advise() -> None:
        """After the first runs: would longer loads decide sooner than more restarts?"""
        if not advised and (advice := load_advice(path, exp_id)):
            tqdm.write(printable(advice.line()), file=sys.stderr)
            advised.update(advice.to_json())

    def progress(event: str, data: dict[str, Any]) -> None:
        if event == "phase":
            bar.set_postfix_str(str(data["phase"]))
        elif event == "run_done":
            bar.total = max(bar.total or 0, int(data["total"]))
            bar.n = int(data.get("done", bar.n + 1))
            bar.refresh()
            tqdm.write(printable(left_line(path, exp_id, bar.n, bar.total)), file=sys.stderr)
        elif event == "repeats" and not data["stop"]:
            tqdm.write(printable(f"repeat until decided: {data['reason']}"), file=sys.stderr)
            advise()
        elif event == "run_failed":
            tqdm.write(
                printable(
                    f"run {data['run_id']} failed [{failure_words(data['kind'])}]: {data['reason']}"
                ),
                file=sys.stderr,
            )
        elif event == "run_suspect":
            why = "; ".join(data["reasons"])
            tqdm.write(
                printable(f"run {data['run_id']} suspect (not counted in verdicts): {why}"),
                file=sys.stderr,
            )
        elif event == "note":
            tqdm.write(printable(f"run {data['run_id']}: note: {data['note']}"), file=sys.stderr)
        elif event == "resident":  # resident engines not used, or a fall back: said once
            tqdm.write(printable(str(data["line"])), file=sys.stderr)

    with bar:
        code, run_ids = _run_stored(path, exp_id, progress, args.start_timeout)
    status, error = _final(path, exp_id)
    plan = _stored_plan(path, exp_id)
    if not plan or not plan.get("stop") or _undecided(plan):  # what would decide it sooner
        advise()
    from tuning.cli.compare import decision_summary

    decided, record = decision_summary(path, exp_id, None if args.db is None else str(args.db))
    resident = _stored_resident(path, exp_id)
    from tuning.compare.resident_words import resident_line

    if args.json:
        out = {"experiment_id": exp_id, "run_ids": run_ids, "status": status, "error": error}
        out["reuse"] = reuse
        out["estimate"] = estimate
        out["load_advice"] = advised or None
        out["decision"] = record
        out["resident"] = resident
        say(json.dumps({**out, "repeats": plan} if plan else out))
    else:
        say(f"experiment {exp_id}: {status}; runs {', '.join(map(str, run_ids)) or 'none'}")
        if plan:
            from tuning.experiment.repeats import repeats_lines

            say("\n".join(repeats_lines(plan)))
        if decided:
            say("\n".join(printable(line) for line in decided))
        if line := resident_line(resident):
            say(printable(line))
    return code


def _stored_resident(path: Path, exp_id: int) -> dict[str, Any] | None:
    """What the experiment stored about resident engines (tuning.experiment.resident)."""
    from store import connect, queries

    with connect(path, readonly=True) as db:
        stored = queries.get_experiment(db, exp_id).get("resident")
    return stored if isinstance(stored, dict) else None


def _undecided(plan: dict[str, Any]) -> bool:
    """Whether the stopping rule's last plan left a value undecided."""
    return any(v.get("state") != "decided" for v in (plan.get("values") or {}).values())


def _executor(path: Path, exp_id: int) -> Executor:
    """Where the experiment's runs go: the fleet it was attached to, else this machine."""
    from store import connect, queries
    from tuning.experiment.runner import run_locally

    with connect(path) as db:
        fleet = queries.get_experiment(db, exp_id).get("fleet")
    if not fleet:
        return run_locally
    from tuning.decide.fleet.executor import run_on_fleet

    return run_on_fleet


def _run_stored(
    path: Path, exp_id: int, progress: Any = None, start_timeout: float = 300.0
) -> tuple[int, list[int]]:
    """Run experiment `exp_id` here; (exit code, run ids). The code says how it ended: 0 done,
    1 failed or cancelled, 3 refused (machine busy), 130 interrupted (resume it later)."""
    from tuning.decide.fleet import FleetError
    from tuning.experiment.lock import RunnerBusy
    from tuning.experiment.runner import run_experiment
    from tuning.experiment.supervisor import settle

    try:
        executor = _executor(path, exp_id)
        run_ids = run_experiment(path, exp_id, progress, start_timeout, executor)
    except RunnerBusy as exc:
        say(f"refused: {exc}", file=sys.stderr)
        return EXIT_BUSY, []
    except FleetError as exc:
        say(f"refused: experiment {exp_id}: {exc}", file=sys.stderr)
        return EXIT_FAILED, []
    except KeyboardInterrupt:
        settle(path, exp_id, Status.CANCELLED, "interrupted before it started")
        say(
            f"experiment {exp_id} interrupted: what ran is stored, the rest is not; "
            f"`{prog_name()} experiment --resume {exp_id}` runs what is left",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED, []
    status, error = _final(path, exp_id)
    if status == Status.DONE:
        return 0, run_ids
    say(f"experiment {exp_id} {status}: {error or 'no reason stored'}", file=sys.stderr)
    return EXIT_FAILED, run_ids


def _final(path: Path, exp_id: int) -> tuple[str, str | None]:
    from store import connect, queries

    with connect(path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
    return str(exp["status"]), exp.get("error")


def _say_reaped(reaped: list[Any]) -> None:
    from tuning.decide.reaper import reaped_text

    for item in reaped:
        say(reaped_text(item), file=sys.stderr)


def _reap(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tuning.experiment.supervisor import reap

    reaped = reap(db_path(args))
    if args.json:
        say(json.dumps([asdict(r) for r in reaped]))
    elif not reaped:
        say("nothing to reap: every active experiment has a live runner")
    else:
        _say_reaped(reaped)
    return 0


def endpoint_ready(args: argparse.Namespace) -> bool:
    """An attached endpoint answers before anything is planned: its model list and a one-token
    probe (the `openai` package), or a plain message about the key, the URL or the model name.
    The probe is bounded by its own deadlines, or by --request-timeout / --stall-timeout where
    they are shorter."""
    from tuning.measure.loadgen.endpoint import (
        PROBE_STALL_S,
        PROBE_TIMEOUT_S,
        EndpointError,
        check_endpoint,
        probe_endpoint,
    )

    def shorter(flag: Any, own: float) -> float:  # a bad value is refused with the workload
        return float(flag) if isinstance(flag, float) and 0 < flag < own else own

    try:
        check_endpoint(args.base_url, args.model)
        probe_endpoint(
            args.base_url,
            args.model,
            endpoint=args.endpoint,
            timeout_s=shorter(args.request_timeout, PROBE_TIMEOUT_S),
            stall_s=shorter(args.stall_timeout, PROBE_STALL_S),
        )
    except EndpointError as exc:
        say(f"error: {exc}", file=sys.stderr)
        return False
    return True


def _stored_plan(path: Any, exp_id: int) -> dict[str, Any] | None:
    """The stopping rule's last plan for an auto experiment, as the runner stored it."""
    from store import connect, queries

    with connect(path, readonly=True) as db:
        plan = queries.get_experiment(db, exp_id).get("repeats_plan")
    return plan if isinstance(plan, dict) else None


def _run_experiment(args: argparse.Namespace) -> int:
    """Run a planned experiment; an imported one is refused unless --use-local-engine, which
    plans its sweep anew on this lab's engine and runs that."""
    from store import StoreError, connect, queries
    from tuning.engine.current import current_spec
    from tuning.experiment.plan import ImportedExperimentError, is_imported, plan_rerun
    from tuning.experiment.supervisor import reap
    from tuning.settings import load_settings

    path, exp_id = db_path(args), args.experiment
    _say_reaped(reap(path))
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
                say(f"experiment {args.experiment} is imported: running it as experiment {exp_id}")
        except (StoreError, ValueError) as exc:
            return refused(str(exc))
    try:
        return _run_stored(path, exp_id)[0]
    except ImportedExperimentError as exc:
        return refused(str(exc))


def run(args: argparse.Namespace) -> int:
    """Dispatch one of COMMANDS (args.command)."""
    if args.command == "bench":
        from tuning.cli.bench import run_bench_command

        return run_bench_command(args)
    if args.command == "experiment":
        return _experiment(args)
    if args.command == "runs":
        from tuning.cli.runs import runs

        return runs(args)
    if args.command == "reap":
        return _reap(args)
    if args.command == "run-experiment":
        return _run_experiment(args)
    return _cancel(args)


def _cancel(args: argparse.Namespace) -> int:
    """Ask experiment --experiment ID to stop: refused (exit 1) when there is no such experiment
    or it has already ended, since then nothing would ever read the request."""
    from core.status import is_active
    from store import StoreError, connect, queries
    from tuning.experiment.supervisor import cancel_experiment, reap

    path = db_path(args)
    reap(path)  # a runner that died reads failed, not running
    try:
        with connect(path, readonly=True) as db:
            exp = queries.get_experiment(db, args.experiment)
    except StoreError as exc:
        return refused(str(exc))
    if not is_active(exp.get("status")):
        return refused(
            f"experiment {args.experiment} is already {exp.get('status')}: nothing to cancel"
        )
    cancel_experiment(path, args.experiment)
    say(
        f"experiment {args.experiment}: cancel requested (its runner stops the server and marks "
        "the run cancelled)"
    )
    return 0
