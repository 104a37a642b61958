"""`tuning-lab search --param NAME --range LO:HI --objective METRIC [--goodput ttft:200 tpot:50]
[--budget-runs N] [--confirm] [workload flags] --db DB [--json]`: the lab chooses the values (a
coarse pass, then bisection around the best and on the start limit), one ordinary run each; run it
again with the same arguments to resume a stopped search. `search show|confirm ID` and
`search import FILE`: tuning.cli.search_show."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuning.cli.args import add_db, add_yes, db_path, refused, say
from tuning.cli.parser import rename_flag
from tuning.cli.search_show import ACTIONS, confirm_limits, drive
from tuning.experiment.size import DEFAULT_BUDGET_MINUTES, DEFAULT_MAX_REPEATS

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("search",)


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "search",
        help="search one parameter over a range for the best value; `search show ID` shows a "
        "search, `search confirm ID` repeats its choice against the baseline until decided, "
        "`search import FILE` records a search from its --json output",
    )
    p.add_argument("action", nargs="?", choices=ACTIONS, help="show, confirm or import")
    p.add_argument("target", nargs="?", metavar="ID|FILE", help="the search's id, or a file")
    p.add_argument("--param", help="the parameter to search (a new search)")
    p.add_argument("--range", metavar="LO:HI", help="its range (a new search)")
    p.add_argument(
        "--confirm",
        action="store_true",
        help="when the search ends, run its choice (undecided: its leader) against its closest "
        "rival with repeats until decided (`search confirm ID --against rival`); the verdict "
        "becomes part of the search's choice",
    )
    p.add_argument(
        "--against",
        choices=("baseline", "rival"),
        default="baseline",
        help="search confirm: the search's choice (or leader) against the baseline's value "
        "(default) or the closest rival",
    )
    p.add_argument(
        "--max-repeats",
        type=int,
        default=None,
        metavar="N",
        help=f"the confirm: at most N runs a value (default {DEFAULT_MAX_REPEATS})",
    )
    p.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        metavar="M",
        help="the confirm: add a round only when the estimate says it fits in M minutes "
        f"(default {DEFAULT_BUDGET_MINUTES:g}; 0: no budget)",
    )
    p.add_argument("--record", type=int, default=None, help=argparse.SUPPRESS)  # the UI's row
    add_search_arguments(p)


def add_search_arguments(p: argparse.ArgumentParser) -> None:
    """The flags `search` and `plan` share: objective, SLOs, budget, baseline, workload, DB."""
    from tuning.measure.traffic.workload import add_workload_arguments

    p.add_argument(
        "--objective",
        default="output_throughput",
        help="a compare metric key (output_throughput, mean_ttft_ms, p99_ttft_ms, ...), goodput, "
        "or time_to_healthy_s (startup time, lower is better; a server parameter on a server "
        "the lab starts)",
    )
    p.add_argument(
        "--goodput",
        nargs="+",
        default=None,
        metavar="METRIC:MS",
        help="SLOs, as vLLM's bench takes them, e.g. ttft:200 tpot:50: a value must meet them at "
        "p99 over its runs (the goodput objective counts the requests within them)",
    )
    rename_flag(p, "--slo", "--goodput")
    p.add_argument(
        "--budget-runs",
        type=int,
        default=8,
        metavar="N",
        help="runs of a search: up to half explore (coarse pass, bisection), the rest race the "
        "contenders with repeats",
    )
    p.add_argument("--coarse", type=int, default=4, metavar="K", help="points of the first pass")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="baseline parameter")
    p.add_argument("--base-url", default=None, help="attach (workload parameters only)")
    p.add_argument("--model", default=None)
    p.add_argument("--start-timeout", type=float, default=300.0)
    p.add_argument("--json", action="store_true")
    add_yes(p)
    add_workload_arguments(p)
    add_db(p)


def search_options(args: argparse.Namespace) -> dict[str, Any]:
    """What a search spec takes from the shared flags (ParamError or ValueError when wrong, one
    line naming the flag: a first pass or an SLO the search could not use is refused here)."""
    from tuning.cli.server import parse_sets
    from tuning.engine.current import current_spec
    from tuning.measure.traffic.workload import workload_from_args

    if args.budget_runs < 2:
        raise ValueError(f"--budget-runs {args.budget_runs}: a search needs at least 2 runs")
    if args.coarse < 2:
        raise ValueError(
            f"--coarse {args.coarse}: the first pass needs at least 2 points (both ends of the "
            "range)"
        )
    slo_ms = search_slo(args)
    return {
        "objective": args.objective,
        "workload": workload_from_args(args),
        "engine": None if args.base_url else current_spec(),
        "base_config": parse_sets(args.set),
        "slo_ms": slo_ms,
        "budget_runs": args.budget_runs,
        "coarse": args.coarse,
        "base_url": args.base_url,
        "model": args.model,
    }


def search_slo(args: argparse.Namespace) -> dict[str, float]:
    """--goodput as the search uses it; an SLO named twice (the last would win unseen) or one no run
    can meet (TPOT of 1-token outputs: no gap between tokens) is refused."""
    from tuning.measure.metrics import parse_slo

    named = [
        p.strip().partition(":")[0]
        for item in args.goodput or []
        for p in str(item).split(",")
        if p.strip()
    ]
    slo_ms = parse_slo(args.goodput)
    twice = sorted({n for n in named if named.count(n) > 1})
    if twice:
        raise ValueError(f"--goodput names {', '.join(twice)} twice: give one limit each")
    searched = [getattr(args, "param", None) or "", *(getattr(args, "params", "") or "").split(",")]
    varies_output = any(s.strip().replace("_", "-") == "output-len" for s in searched)
    if "tpot" in slo_ms and args.output_len < 2 and not varies_output:
        raise ValueError(
            f"--goodput tpot:{slo_ms['tpot']:g} with --output-len {args.output_len}: a one-token "
            "output has no time per output token, so no run could meet it"
        )
    return slo_ms


def search_estimate(spec: Any, path: Path) -> dict[str, Any]:
    """Print a search's estimate (its budget of runs, less the steps stored) and return it."""
    from tuning.cli.estimate import say_estimate, search_costs
    from tuning.decide.search.driver import observations
    from tuning.decide.search.race import budget_text
    from tuning.experiment.estimate import for_search

    stored = observations(path, spec).used
    say(budget_text(spec.budget_runs, spec.coarse_points), file=sys.stderr)
    return say_estimate(for_search(search_costs(spec, path), spec.budget_runs, stored))


# The parameter types a search can bisect, and whether their values are whole numbers.
SEARCHABLE = {"int": True, "bytes": True, "float": False}


def parse_range(param: str, text: str, flag: str = "--range") -> Any:
    """'1:32' -> Space(1, 32, integer) for an int (or byte-count) parameter; floats otherwise.
    A range the search could not use is refused: a parameter that is not a number, an end the
    parameter does not accept (every step there would be refused mid-search), or LO >= HI."""
    from tuning.decide.search.strategy import Space
    from tuning.engine.params import ParamError, get_param
    from tuning.engine.validate import validate_value

    p = get_param(param)
    if p.type not in SEARCHABLE:
        raise ValueError(
            f"{flag} {text!r}: {p.name} is {p.type}, not a number, so there is no range to "
            f"search; run its values with `experiment --param {p.name} --values ...`"
        )
    lo_text, sep, hi_text = text.partition(":")
    if not sep:
        raise ValueError(f"{flag} {text!r}: expected LO:HI")
    integer = SEARCHABLE[p.type]
    try:
        lo, hi = (int(lo_text), int(hi_text)) if integer else (float(lo_text), float(hi_text))
    except ValueError:
        raise ValueError(f"{flag} {text!r}: LO and HI must be numbers") from None
    for end in (lo, hi):
        try:
            validate_value(p.name, end)
        except ParamError as exc:
            raise ValueError(f"{flag} {text!r}: {exc}") from None
    try:
        return Space(float(lo), float(hi), integer)
    except ValueError as exc:
        raise ValueError(f"{flag} {text!r}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    from tuning.decide.search.driver import SearchSpec, run_search
    from tuning.decide.search.record import recorded
    from tuning.engine.params import ParamError

    if args.action:
        from tuning.cli import search_show

        return search_show.run(args)
    for flag, value in (("--param", args.param), ("--range", args.range)):
        if not value:
            return refused(f"search: {flag} is required (or `search show ID`)")
    limits = args.max_repeats is not None or args.budget_minutes is not None
    if limits and not args.confirm:
        return refused(
            "search: --max-repeats and --budget-minutes limit the confirm: add --confirm"
        )
    try:
        spec = SearchSpec(
            param=args.param, space=parse_range(args.param, args.range), **search_options(args)
        )
        spec.validate()
        confirm_limits(args)  # refused before the search runs, not after
    except (ParamError, ValueError) as exc:
        return refused(str(exc))

    def progress(event: str, data: dict[str, Any]) -> None:
        say(f"step {data['step']}: {args.param} = {data['value']} ({data['why']})", file=sys.stderr)

    estimate = search_estimate(spec, db_path(args))

    def search() -> dict[str, Any]:
        with recorded(db_path(args), spec, args.record) as keep:
            found = run_search(db_path(args), spec, progress, start_timeout=args.start_timeout)
            keep(found)
        return found

    code, result = drive(search)
    if code:
        return code
    result["estimate"] = estimate
    if args.confirm:
        from tuning.cli.search_show import confirm_search
        from tuning.decide.search.confirm import confirm_values
        from tuning.decide.search.show import find_search, search_facts

        known = search_facts(db_path(args), find_search(db_path(args), result["search_id"]))
        if confirm_values(known, "rival") is None:
            say("confirm: no leader and rival to confirm", file=sys.stderr)
        else:
            code, confirmed = drive(
                lambda: confirm_search(
                    db_path(args),
                    result["search_id"],
                    "rival",
                    args.start_timeout,
                    confirm_limits(args),
                )
            )
            if code:
                return code
            result["confirm"], result["choice"] = confirmed["confirm"], confirmed["choice"]
    if args.json:
        say(json.dumps(result, indent=2))
        return 0
    from tuning.compare.catalog import METRIC_BY_KEY, metric_label
    from tuning.compare.present import fmt
    from tuning.decide.search.words import failed_words
    from tuning.engine.value_text import format_value

    objective = result["objective"]
    unit = METRIC_BY_KEY[objective].unit if objective in METRIC_BY_KEY else ""
    for e in result["log"]:
        say(
            f"step {e['step']}: {args.param} = {format_value(e['value'])} run {e['run_id']} "
            f"{e['status']}{failed_words(e)} "
            f"{metric_label(objective)} {fmt(e.get(objective), unit)} ({e['why']})"
        )
    if limit := result["start_limit"]:
        say(
            f"start limit: {args.param} = {limit['starts']} starts, {limit['fails']} does not "
            f"(the largest value that starts is in [{limit['starts']}, {limit['fails']}))"
        )
    from tuning.decide.search.show import confirm_line, find_search, search_facts

    shown = search_facts(db_path(args), find_search(db_path(args), result["search_id"]))
    say(f"{shown['choice']['line']}; stopped: {result['stopped']}")
    if result.get("confirm"):
        say(confirm_line(shown))
    return 0
