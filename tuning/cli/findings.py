"""`tuning-lab findings --run ID [--json] --db DB`: what a stored run's signals say
(preemptions, waiting with a roomy KV cache, a client-bound load, prefix-cache misses, a flag the
engine did not apply), each with the next experiment to try and its command line."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tuning.cli.args import add_db, db_path, printable, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("findings",)


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser("findings", help="what a run's signals say, and the next experiment")
    p.add_argument("--run", type=int, required=True, metavar="ID")
    p.add_argument("--json", action="store_true")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from store import connect, queries
    from tuning.decide.findings import finding_lines, stored_findings

    with connect(db_path(args), readonly=True) as db:
        row = queries.get_run(db, args.run)
        found = stored_findings(db, row)
    if args.json:
        data = {"run_id": args.run, "findings": [f.to_dict(row) for f in found]}
        say(json.dumps(data, indent=2))
        return 0
    for line in finding_lines(found, row):
        say(printable(line))
    return 0
