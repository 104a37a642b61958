"""`tuning-lab search show ID [--json]`, `search confirm ID [--json]`, `search import FILE`:
a search as a result of its own (tuning.decide.search.show), confirming its choice with repeats
until
decided (tuning.decide.search.confirm), and recording a search of a lab from before searches had
rows
(tuning.decide.search.adopt). `search` dispatches here when its first word is one of these."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import json_depth
from tuning.cli.args import EXIT_INTERRUPTED, db_path, refused, say
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES, DEFAULT_MAX_REPEATS

if TYPE_CHECKING:
    from tuning.experiment.repeats import AutoRepeats

ACTIONS = ("show", "confirm", "import")
MAX_JSON_BYTES = 16 << 20  # a search's --json output is a few KiB; refuse anything huge


def drive(call: Callable[[], dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """Run a search or a plan: (0, its result), or the exit code of a refusal (1, a busy runner
    too), of a step that measured nothing (1: the search stopped, its measured steps kept; 130
    when the user cancelled it) or of Ctrl-C / SIGTERM (130, one line, no traceback)."""
    from tuning.decide.search.driver import StepUnmeasured
    from tuning.engine.params import ParamError
    from tuning.experiment.lock import RunnerBusy

    try:
        return 0, call()
    except KeyboardInterrupt:  # the runner has stopped the server; the rows say cancelled
        say(
            "interrupted: the search and its step's experiment are cancelled; the finished "
            "steps are stored",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED, {}
    except RunnerBusy as exc:
        return refused(str(exc)), {}
    except StepUnmeasured as exc:  # a step the user cancelled reads like Ctrl-C
        say(f"{'stopped' if exc.cancelled else 'error'}: {exc}", file=sys.stderr)
        return (EXIT_INTERRUPTED if exc.cancelled else 1), {}
    except (ParamError, ValueError) as exc:
        return refused(str(exc)), {}


def _search_id(text: str | None) -> int | None:
    try:
        return int(text or "")
    except ValueError:
        return None


def print_facts(facts: dict[str, Any], as_json: bool) -> None:
    from tuning.decide.search.show import search_lines

    if as_json:
        say(json.dumps(facts, indent=2))
        return
    for line in search_lines(facts):
        say(line)


def _show(path: Path, search_id: int, as_json: bool) -> int:
    from store import StoreError
    from tuning.decide.search.show import find_search, search_facts

    try:
        row = find_search(path, search_id)
    except StoreError as exc:
        return refused(f"search {search_id}: {exc}")
    print_facts(search_facts(path, row), as_json)
    return 0


def confirm_limits(args: argparse.Namespace) -> AutoRepeats:
    """The confirm's until-decided limits from `--max-repeats` and `--budget-minutes` (the
    experiment's own defaults; a budget of 0 is none). ValueError for a bad limit."""
    from tuning.experiment.repeats import AutoRepeats

    budget = DEFAULT_BUDGET_MINUTES if args.budget_minutes is None else args.budget_minutes
    return AutoRepeats(
        max_repeats=DEFAULT_MAX_REPEATS if args.max_repeats is None else args.max_repeats,
        budget_minutes=budget or None,
    )


def confirm_search(
    path: Path,
    search_id: int,
    against: str = "baseline",
    start_timeout: float = 300.0,
    auto: AutoRepeats | None = None,
) -> dict[str, Any]:
    """Plan the confirming experiment and run it here (the machine lock held), repeated until
    decided within `auto`'s limits; the facts after."""
    from tuning.decide.search.confirm import plan_confirm
    from tuning.decide.search.record import keep_confirm, spec_from_json
    from tuning.decide.search.show import find_search, search_facts
    from tuning.engine.current import current_spec
    from tuning.engine.spec import EngineError
    from tuning.experiment.runner import run_experiment

    row = find_search(path, search_id)
    known = search_facts(path, row)
    try:
        engine = None if row["spec"].get("base_url") else current_spec()
    except EngineError as exc:
        raise ValueError(f"search confirm: {exc}") from None
    exp_id = plan_confirm(path, known, spec_from_json(row["spec"], engine), against, auto)
    say(f"confirming search {search_id}: experiment {exp_id}", file=sys.stderr)
    run_experiment(path, exp_id, start_timeout=start_timeout)
    shown = search_facts(path, find_search(path, search_id))
    keep_confirm(path, search_id, shown)
    return shown


def _confirm(args: argparse.Namespace, search_id: int) -> int:
    from store import StoreError
    from tuning.decide.search.show import find_search

    try:
        find_search(db_path(args), search_id)
    except StoreError as exc:
        return refused(f"search {search_id}: {exc}")
    code, found = drive(
        lambda: confirm_search(
            db_path(args), search_id, args.against, args.start_timeout, confirm_limits(args)
        )
    )
    if not code:
        print_facts(found, args.json)
    return code


def _import(args: argparse.Namespace, file: Path) -> int:
    from tuning.decide.search.adopt import import_result

    try:
        if file.stat().st_size > MAX_JSON_BYTES:
            return refused(f"{file}: over {MAX_JSON_BYTES >> 20} MiB, not a search's --json output")
        data = json_depth.loads(file.read_text())  # TooDeep (a ValueError), never RecursionError
    except (OSError, ValueError) as exc:
        return refused(f"{file}: {exc}")
    if not isinstance(data, dict):
        return refused(f"{file}: expected a search's --json output (an object)")
    try:
        search_id = import_result(db_path(args), data, str(file))
    except ValueError as exc:
        return refused(str(exc))
    say(f"recorded search {search_id} from {file}", file=sys.stderr)
    return _show(db_path(args), search_id, args.json)


def run(args: argparse.Namespace) -> int:
    """`search show|confirm ID`, `search import FILE`."""
    if not args.target:
        return refused(f"search {args.action}: give the search's {_what(args.action)}")
    if args.action == "import":
        return _import(args, Path(args.target))
    search_id = _search_id(args.target)
    if search_id is None:
        return refused(f"search {args.action} {args.target!r}: the search's id is a whole number")
    if args.action == "show":
        return _show(db_path(args), search_id, args.json)
    return _confirm(args, search_id)


def _what(action: str) -> str:
    return "--json output file" if action == "import" else "id (`search show ID`)"
