"""`tuning-lab flags [--json] [--search WORD] [--refresh]`: every flag of the engine in use,
as its own parser defines it, marked curated (the lab knows its units and checks), tunable, or
refused with the reason."""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from tuning.cli.args import add_db, db_path, refused, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers
    from tuning.engine.flags.catalog import FlagInfo

COMMANDS = ("flags",)
HELP_WIDTH = 95  # the start of each help text, on the line under its flag (all of it: --json)


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "flags", help="every flag of the engine's vLLM: type, default, help, whether it is tunable"
    )
    p.add_argument("--json", action="store_true", help="the flags as one JSON object")
    p.add_argument("--search", metavar="WORD", help="only flags whose name, group or help has it")
    p.add_argument(
        "--refresh", action="store_true", help="read the engine's parser again (not the cache)"
    )
    p.add_argument(
        "--env",
        action="store_true",
        help="vLLM's environment knobs (VLLM_*) instead: tuned only when an experiment names one",
    )
    add_db(p)


def _row(info: FlagInfo) -> dict[str, Any]:
    from tuning.engine.learn import flag_status

    status, why = flag_status(info)
    return {
        "name": info.name,
        "type": info.kind,  # of each element when `nargs` says it takes several
        "nargs": info.nargs,
        "choices": list(info.options if info.names_code else info.choices),
        "default": info.default,
        "group": info.group,
        "help": info.help,
        "status": status,
        "reason": why,
        "code_keys": list(info.code_keys),  # keys of its JSON value never tuned (code, files)
    }


def run(args: argparse.Namespace) -> int:
    from tuning.engine.current import current_spec
    from tuning.engine.flags.catalog import CatalogError
    from tuning.engine.learn import catalog_for
    from tuning.engine.spec import EngineError

    try:
        spec = current_spec()
        if not args.refresh:
            say("reading the engine's flags (cached after the first time)...", file=sys.stderr)
        catalog = catalog_for(db_path(args), spec, refresh=args.refresh)
    except (EngineError, CatalogError) as exc:
        return refused(str(exc))
    rows = [_row(f) for f in catalog.search(args.search, env=args.env)]
    if args.json:
        say(
            json.dumps(
                {
                    "engine": spec.name,
                    "python": catalog.python,
                    "vllm_version": catalog.vllm_version,
                    "parser": catalog.parser,
                    "count": len(rows),
                    "flags": rows,
                }
            )
        )
        return 0
    what = "environment knob(s)" if args.env else "flag(s)"
    say(f"vLLM {catalog.vllm_version} ({catalog.python}): {len(rows)} {what}")
    group = None
    for row in rows:
        if row["group"] != group:
            group = row["group"]
            say(f"\n[{group or 'other'}]")
        kind = row["type"] + (f" {{{','.join(row['choices'])}}}" if row["choices"] else "")
        if row["nargs"] in ("+", "*"):  # one list per value: [1,2,4,8]
            kind = f"a list of {kind}, each value in brackets"
        mark = {"curated": "*", "tunable": " ", "refused": "x"}[row["status"]]
        dashes = "" if args.env else "--"
        say(f" {mark} {dashes}{row['name']} ({kind}; default {row['default']!r})")
        if row["reason"]:
            say(f"     never tuned: {row['reason']}")
        elif row["help"]:
            say("     " + textwrap.shorten(row["help"], HELP_WIDTH, placeholder=" ..."))
        if row["code_keys"] and not row["reason"]:
            keys = ", ".join(row["code_keys"])
            say("     " + textwrap.shorten(f"never tuned inside it: {keys}", HELP_WIDTH))
    say("\n* curated (the lab knows its units and checks it)   x never tuned (the reason is given)")
    return 0
