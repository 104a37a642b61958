"""`tuning-lab plan show ID [--json]` and `plan list [--json]`: a tuning plan as a result of
its own (tuning.decide.search.plan_show), as `search show ID` shows a search. `plan` dispatches
here when
its first word is one of these."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tuning.cli.args import db_path, refused, say
from tuning.cli.parser import prog_name

ACTIONS = ("show", "list")


def _show(path: Path, target: str | None, as_json: bool) -> int:
    from store import StoreError
    from tuning.decide.search.plan_record import reap_plans
    from tuning.decide.search.plan_show import find_plan, plan_facts, plan_lines

    if not target:
        return refused("plan show: give the plan's id (`plan list` lists them)")
    try:
        plan_id = int(target)
    except ValueError:
        return refused(f"plan show {target!r}: the plan's id is a whole number")
    if path.exists():
        reap_plans(path)
    try:
        found = plan_facts(find_plan(path, plan_id))
    except StoreError as exc:
        return refused(f"plan {plan_id}: {exc}")
    if as_json:
        say(json.dumps(found, indent=2))
        return 0
    for line in plan_lines(found):
        say(line)
    return 0


def _list(path: Path, as_json: bool) -> int:
    from tuning.decide.search.plan_show import label, plan_facts, plan_rows

    rows = plan_rows(path)
    if as_json:
        say(json.dumps([plan_facts(r) for r in rows], indent=2))
        return 0
    if not rows:
        say(f"no plan yet: `{prog_name()} plan --params A,B --param-range ...`", file=sys.stderr)
    for row in rows:
        say(label(row))
    return 0


def run(args: argparse.Namespace) -> int:
    """`plan show ID`, `plan list`."""
    if args.action == "list":
        if args.target:
            return refused(f"plan list {args.target!r}: takes no id (`plan show ID` shows one)")
        return _list(db_path(args), args.json)
    return _show(db_path(args), args.target, args.json)
