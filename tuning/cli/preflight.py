"""Refusals of a command's arguments that need no DB, engine or server: each is one line naming
the flag, said before anything is read, started or written (tuning.cli.main asks `problem` first).

- A compressed snapshot (`--db lab.db.xz`, or TUNING_LAB_DB) is read-only: a command that would
  write (an experiment, an import, a search...) is refused with the way out, instead of writing
  into the cached expansion under ~/.cache where the results would live unseen.
- JSON in `--values` and `--set` is bounded in nesting before any parser recurses.
- Every output file can be written (tuning.cli.outputs).
- `--set` of the parameter an experiment varies is refused (each run sets its own value); for a
  search or a plan it means the start value the confirmation compares against, and `notes` says
  so (as it says a first pass longer than the budget, which ends it unrefined).
- A request for more runs than tuning.experiment.size allows needs `--yes`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.json_depth import nesting_words, too_deep
from tuning.cli.outputs import output_problem
from tuning.settings import configured_db_path

# Commands that write to the lab's DB (a search's or plan's `show`/`list` only read).
_WRITERS = frozenset({"experiment", "run-experiment", "cancel", "reap", "import", "demo"})
_COMPRESSED = (".xz", ".gz")  # store.snapshot's (not imported here: `--help` stays light)


def configured_db(args: argparse.Namespace) -> Path | None:
    """The DB a command names, as named (a compressed one not expanded); None without --db."""
    if not hasattr(args, "db"):
        return None
    return Path(args.db) if args.db else configured_db_path()


def compressed_name(path: Path | None) -> bool:
    return path is not None and path.suffix in _COMPRESSED


def writes_db(args: argparse.Namespace) -> bool:
    command, action = args.command, getattr(args, "action", None)
    if command in ("search", "plan"):
        return action in (None, "confirm", "import")
    if command == "team":
        return bool(args.import_new)
    if command == "workload":
        return bool(args.workload_command == "save")
    return command in _WRITERS


def snapshot_problem(args: argparse.Namespace) -> str | None:
    db = configured_db(args)
    if db is None or not compressed_name(db) or not writes_db(args):
        return None
    from store.snapshot import read_only_words

    return read_only_words(db, "--db {plain}" if args.db else "TUNING_LAB_DB={plain}")


def _set_items(args: argparse.Namespace) -> list[tuple[str, str]]:
    items = getattr(args, "set", None) or []
    return [(n.strip(), v) for n, sep, v in (str(i).partition("=") for i in items) if sep]


def nesting_problem(args: argparse.Namespace) -> str | None:
    values = getattr(args, "values", None)
    if isinstance(values, str) and too_deep(values):
        return f"--values: {nesting_words()}"
    for name, value in _set_items(args):
        if too_deep(value):
            return f"--set {name}: {nesting_words()}"
    return None


def canonical(name: str) -> str:
    """A parameter's name as the lab keys it: `--max_num_seqs` and `max-num-seqs` are one."""
    from tuning.engine.params import ParamError, get_param

    key = name.strip().removeprefix("--")
    try:
        return get_param(key).name
    except ParamError:  # a flag of the user's vLLM: its dashed form
        return key if key.isupper() else key.replace("_", "-")


def _fights(args: argparse.Namespace, params: list[str]) -> list[tuple[str, str]]:
    wanted = {canonical(p) for p in params if p.strip()}
    return [(n, v) for n, v in _set_items(args) if canonical(n) in wanted]


def set_problem(args: argparse.Namespace) -> str | None:
    from tuning.engine.params import PARAMS

    if args.command not in ("experiment", "search", "plan"):
        return None  # `server start` and `predict` refuse a workload knob in their own words
    for name, value in _set_items(args):
        param = PARAMS.get(canonical(name))
        if param is not None and param.kind == "workload":
            return (
                f"--set {name}={value}: {param.name} is a workload setting, not a server flag: "
                f"give it as --{param.name} {value}"
            )
    if getattr(args, "base_url", None):
        for name, value in _set_items(args):
            return (
                f"--set {name}={value}: an attached server (--base-url) runs with its own "
                "flags, which the lab cannot set; drop the --set, or let the lab start its engine"
            )
    if args.command != "experiment" or not getattr(args, "param", None):
        return None
    for name, value in _fights(args, [args.param]):
        return (
            f"--set {name}={value}: {canonical(name)} is the parameter this experiment varies "
            "(--param); each run sets it to its own value, so this one would never run: drop "
            "the --set, or add the value to --values"
        )
    return None


def _varied(args: argparse.Namespace) -> list[str]:
    """The parameters the command runs values of (experiment, search, plan)."""
    if args.command == "experiment" and args.resume is None:
        return [args.param or ""]
    if args.command == "search" and not args.action:
        return [args.param or ""]
    if args.command == "plan" and not args.action:
        return (args.params or "").split(",")
    return []


def attach_problem(args: argparse.Namespace) -> str | None:
    """A server parameter on an attached server: it would be refused at the first step."""
    from tuning.engine.params import PARAMS

    if not getattr(args, "base_url", None):
        return None
    for name in (n for n in _varied(args) if n.strip()):
        param = PARAMS.get(canonical(name))
        if param is None or param.restarts_server:
            knobs = ", ".join(p.name for p in PARAMS.values() if not p.restarts_server)
            return (
                f"{canonical(name)} needs a server restart, and --base-url attaches to a server "
                f"the lab does not start: vary a workload parameter ({knobs}) or drop --base-url"
            )
    return None


def notes(args: argparse.Namespace) -> list[str]:
    """Lines said before a search or plan whose --set names a searched parameter: the start
    value the confirmation compares against, not a value its steps run."""
    if args.command not in ("search", "plan") or getattr(args, "action", None):
        return []
    searched = [args.param or ""] if args.command == "search" else (args.params or "").split(",")
    where = (
        "the baseline value `search confirm` compares the choice against"
        if args.command == "search"
        else "the start configuration's value that the recommendation is compared against"
    )
    lines = [
        f"note: --set {name}={value} is {where}; the search runs its own values of "
        f"{canonical(name)}, never this one"
        for name, value in _fights(args, searched)
    ]
    if args.coarse > args.budget_runs >= 2:
        lines.append(
            f"note: --coarse {args.coarse} is more points than --budget-runs {args.budget_runs}: "
            f"the first pass ends after {args.budget_runs} of them and nothing is refined"
        )
    return lines


def _asked_runs(args: argparse.Namespace) -> tuple[int, str] | None:
    """(the most runs the command may start, what asked for them); None when it starts none."""
    from tuning.experiment import size

    command = args.command
    if command == "experiment" and args.values and args.resume is None:
        from tuning.engine.params import split_values
        from tuning.experiment.size import DEFAULT_MAX_REPEATS

        try:
            count = len(split_values(args.values))
        except ValueError:  # refused with its reason when the values are parsed
            return None
        if args.repeats == "auto":
            most = args.max_repeats or DEFAULT_MAX_REPEATS
            runs = size.experiment_runs(count, 1, most)
            return runs, f"--values: {count:,} values x up to {most} runs each (--repeats auto)"
        runs = size.experiment_runs(count, args.repeats)
        return runs, f"--values: {count:,} values x {args.repeats} repeat(s)"
    if command == "search" and not args.action:
        extra = 0
        if args.confirm:
            from tuning.experiment.size import DEFAULT_MAX_REPEATS

            extra = 2 * DEFAULT_MAX_REPEATS
        return args.budget_runs + extra, f"--budget-runs {args.budget_runs}" + (
            " and --confirm" if extra else ""
        )
    if command == "plan" and not args.action and args.params:
        params = [p for p in args.params.split(",") if p.strip()]
        runs = size.plan_runs(len(params), args.budget_runs, args.confirm_repeats)
        return runs, (
            f"{len(params)} searches of --budget-runs {args.budget_runs} and "
            f"--confirm-repeats {args.confirm_repeats}"
        )
    return None


def size_problem(args: argparse.Namespace) -> str | None:
    from tuning.experiment.size import needs_yes, over_cap

    asked = _asked_runs(args)
    if asked is None or getattr(args, "yes", False) or not needs_yes(asked[0]):
        return None
    runs, what = asked
    return f"{over_cap(runs, what)}: add --yes to start them all, or ask for fewer"


def problem(args: argparse.Namespace) -> str | None:
    """The first reason to refuse this command before any work, or None."""
    for check in (snapshot_problem, nesting_problem, set_problem, attach_problem, size_problem):
        if why := check(args):
            return why
    db = configured_db(args)
    return output_problem(args, None if compressed_name(db) else db)
