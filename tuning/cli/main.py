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
from tuning.cli.edges import quiet_closed_pipe, warnings_once
from tuning.cli.helps import fill_help
from tuning.cli.parser import LabParser, prog_name

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


# How `--help` lists the commands: by what a user is doing.
COMMAND_GROUPS = [
    ("start here", ["doctor", "demo"]),
    ("measure", ["experiment", "search", "plan", "bench", "predict", "workload"]),
    ("read results", ["runs", "compare", "chart", "report", "findings", "inert"]),
    ("share", ["export", "import", "publish", "team"]),
    ("engine and runs", ["engine", "server", "flags", "fleet", "cancel", "reap"]),
]


class _Version(argparse.Action):
    """`--version`: the lab's version (and vLLM's when known cheaply), read only when asked."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the lab's version (and the configured vLLM's, when known without "
            "starting it) and exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from tuning.cli.version import version_text

        say(version_text())
        parser.exit(0)


def build_parser(prog: str | None = None) -> argparse.ArgumentParser:
    """The whole CLI; `prog` names it in usage lines (default: as it was started, prog_name)."""
    parser = LabParser(
        prog=prog or prog_name(),
        description="vLLM Tuning Lab: one variable at a time.",
        epilog="exit codes: 0 done, 1 failed or refused, 2 usage error, 130 interrupted. "
        "`%(prog)s COMMAND --help` for a command's flags.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in MODULES:
        module.add_arguments(sub)
    fill_help(parser)  # the flags lower layers define without help get the CLI's words
    parser.command_groups = COMMAND_GROUPS
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
    """`tuning-lab ...` / `python -m tuning ...` (tuning/__main__.py); the exit code of the
    command (args.EXIT_CODES). A reader that closed the pipe ends it quietly (edges)."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at the interpreter's exit, where it could not be caught
        return code
    except BrokenPipeError:
        return quiet_closed_pipe()


def _main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    warnings_once()
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
