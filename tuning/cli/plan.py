"""`tuning-lab plan --params a,b --param-range a=LO:HI --param-range b=LO:HI
[--objective METRIC] [--goodput ttft:200] [--budget-runs N] [--confirm-repeats R] [--out FILE]
[--set NAME=VALUE] [workload flags] --db DB [--json]`: one search per parameter, in order, each
winner the next baseline; then start vs recommended, counterbalanced, and the recommendation. Run it
again with the same arguments to resume a stopped plan (it is one row of the store, `plan_id`).
`plan show ID` and `plan list`: tuning.cli.plan_show."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuning.cli.args import at_least_one, db_path, refused, say
from tuning.cli.parser import rename_flag

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("plan",)


def add_arguments(sub: Subparsers) -> None:
    from tuning.cli.plan_show import ACTIONS
    from tuning.cli.search import add_search_arguments

    p = sub.add_parser(
        "plan",
        help="search several parameters in order; recommend a config; `plan show ID` shows a "
        "stored plan, `plan list` lists them",
    )
    p.add_argument("action", nargs="?", choices=ACTIONS, help="show or list")
    p.add_argument("target", nargs="?", metavar="ID", help="the plan's id (plan show)")
    p.add_argument("--params", help="comma-separated, searched in this order (a new plan)")
    p.add_argument(
        "--param-range",
        action="append",
        default=[],
        metavar="NAME=LO:HI",
        help="the range of one parameter of --params (one each)",
    )
    p.add_argument(
        "--confirm-repeats",
        type=at_least_one,
        default=3,
        metavar="R",
        help="runs a side of start vs recommended, counterbalanced (at least 2)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the plan's report to FILE, as an offline HTML page",
    )
    rename_flag(p, "--report", "--out")
    p.add_argument(
        "--include-inert",
        action="store_true",
        help="search the parameters the lab found inert on this workload too (by default they "
        "are skipped, and named: `inert` lists them)",
    )
    add_search_arguments(p)


def parse_ranges(items: list[str]) -> dict[str, Any]:
    """['max-num-seqs=1:64'] -> {'max-num-seqs': Space(1, 64, integer)}."""
    from tuning.cli.search import parse_range
    from tuning.engine.params import get_param

    out: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--param-range {item!r}: expected NAME=LO:HI")
        out[get_param(name.strip()).name] = parse_range(
            name.strip(), text.strip(), f"--param-range {name.strip()}"
        )
    return out


def run(args: argparse.Namespace) -> int:
    from tuning.cli.estimate import say_estimate, search_costs
    from tuning.cli.search import search_options
    from tuning.cli.search_show import drive
    from tuning.decide.search.plan import (
        PlanSpec,
        run_plan,
        skip_inert,
        skipped_text,
        summary_lines,
    )
    from tuning.decide.search.race import budget_text
    from tuning.engine.params import ParamError, get_param
    from tuning.experiment.estimate import for_plan
    from tuning.present.plan_report import write_plan_report

    if args.action:
        from tuning.cli import plan_show

        return plan_show.run(args)
    if not args.params:
        return refused("plan: --params is required (or `plan show ID`, `plan list`)")
    try:
        params = [get_param(p.strip()).name for p in args.params.split(",") if p.strip()]
        spec = PlanSpec(
            params=params,
            spaces=parse_ranges(args.param_range),
            confirm_repeats=args.confirm_repeats,
            **search_options(args),
        )
        spec.validate()
        skipped = [] if args.include_inert else skip_inert(db_path(args), spec)
    except (ParamError, ValueError) as exc:
        return refused(str(exc))
    if skipped:
        say(f"skipping, inert on this workload: {skipped_text(skipped)}", file=sys.stderr)

    def progress(event: str, data: dict[str, Any]) -> None:
        if event == "search":  # and what its budget buys: exploring, then the race
            points = len(spec.spaces[data["param"]].coarse(spec.coarse))
            text = f"search {data['index']} of {data['of']}: {data['param']}; "
            text += budget_text(spec.budget_runs, points)
        elif event == "confirm":
            text = f"confirm round {data['round']}: {data['side']} configuration"
        else:
            text = f"  step {data['step']}: {data['value']} ({data['why']})"
        say(text, file=sys.stderr)

    estimate = say_estimate(
        for_plan(
            search_costs(spec, db_path(args)),
            len(spec.params),
            spec.budget_runs,
            spec.confirm_repeats,
        )
    )
    code, result = drive(
        lambda: run_plan(db_path(args), spec, progress, start_timeout=args.start_timeout)
    )
    if code:
        return code
    result["skipped_inert"] = [k.to_json() for k in skipped]
    result["estimate"] = estimate
    if args.out:
        result["report"] = str(write_plan_report(result, args.out))
    if args.json:
        say(json.dumps(result, indent=2))
        return 0
    for line in summary_lines(result):
        say(line)
    if args.out:
        say(f"report: {result['report']}")
    return 0
