"""The lab's CLI: everything the UI does, for scripts, tests and headless GPU boxes.

Each module of tuning/cli adds its commands (`add_arguments`) and runs them (`run`); this one only
builds the parser and dispatches. Heavy imports (Altair, pandas, the runner) wait until a command
needs them, so `python -m tuning --help` starts fast on a box without them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from tuning.cli import (
    compare,
    demo,
    doctor,
    experiment,
    findings,
    flags,
    fleet,
    inert,
    plan,
    predict,
    search,
    server,
    share,
    workload,
)
from tuning.cli.args import EXIT_INTERRUPTED, base_url_problem, refused, say

MODULES = (
    server,
    experiment,
    compare,
    share,
    predict,
    search,
    plan,
    inert,
    findings,
    workload,
    flags,
    doctor,
    fleet,
    demo,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tuning", description="vLLM Tuning Lab: one variable at a time."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for module in MODULES:
        module.add_arguments(sub)
    return parser


# Commands that show or act on experiments' status: the reaper runs first, so a run whose runner
# was SIGKILLed reads `failed`, never `running` (`experiment`, `cancel` and `reap` reap themselves).
# `search` and `plan` reap first too: a killed search run again says what it reaped.
REAP_FIRST = frozenset(
    {
        "runs",
        "compare",
        "inert",
        "chart",
        "report",
        "export",
        "publish",
        "findings",
        "search",
        "plan",
    }
)


def _reap_first(args: argparse.Namespace) -> None:
    from tuning.cli.args import db_path, say
    from tuning.cli.preflight import compressed_name, configured_db
    from tuning.decide.reaper import reap_dead, reaped_text

    if compressed_name(configured_db(args)):  # a snapshot is a record: read, never reaped
        return
    for item in reap_dead(db_path(args)):
        say(reaped_text(item), file=sys.stderr)
    if args.command == "runs":  # requests a run could not store (a full disk) arrive now
        from tuning.experiment.spool import store_spooled

        for line in store_spooled(db_path(args)):
            say(line, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tuning ...` (tuning/__main__.py); the exit code of the command."""
    args = build_parser().parse_args(argv)
    module = next(m for m in MODULES if args.command in m.COMMANDS)
    if problem := base_url_problem(args):
        return refused(problem)
    from tuning.cli import preflight

    if problem := preflight.problem(args):  # before the DB, the engine or a server is touched
        return refused(problem)
    for line in preflight.notes(args):
        say(line, file=sys.stderr)
    try:
        if args.command in REAP_FIRST and hasattr(args, "db"):
            _reap_first(args)
        return module.run(args)
    except KeyboardInterrupt:  # Ctrl-C where no command catches it: one line, never a traceback
        say("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a damaged or newer lab DB: a plain message, never a traceback
        from tuning.cli.args import store_refusal

        message = store_refusal(args, exc)
        if message is None:
            raise
        return refused(message)
