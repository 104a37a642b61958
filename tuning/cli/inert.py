"""`tuning-lab inert [--fingerprint FP] [--margin PCT] [--json] --db DB`: the knobs whose
tried values were all equivalent on a workload, from the stored experiments (tuning.compare.inert);
`plan` skips them on the same workload unless `--include-inert`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tuning.cli.args import add_db, db_path, refused, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("inert",)


def add_arguments(sub: Subparsers) -> None:
    from tuning.cli.compare import margin_pct

    p = sub.add_parser(
        "inert",
        help="flags whose tried values were all equivalent on a workload (plan skips them)",
    )
    p.add_argument(
        "--fingerprint",
        default=None,
        metavar="FP",
        help="only this workload fingerprint (as `runs --json` shows it)",
    )
    p.add_argument(
        "--margin",
        type=margin_pct,
        default=None,
        metavar="PCT",
        help="equivalence margin E in %% of the reference's mean (default 2)",
    )
    p.add_argument("--json", action="store_true", help="every judged knob as JSON, inert or not")
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from store import StoreError, connect
    from tuning.compare.catalog import metric_label
    from tuning.compare.inert import knobs
    from tuning.compare.prefer import WATCHED
    from tuning.compare.stats import MARGIN

    margin = args.margin or MARGIN
    try:
        with connect(db_path(args), readonly=True) as db:
            judged = knobs(db, args.fingerprint, margin)
    except StoreError as exc:
        return refused(str(exc))
    if args.json:
        data = {
            "equivalence_margin": margin,
            "watched_metrics": list(WATCHED),
            "knobs": [k.to_json() for k in judged],
        }
        say(json.dumps(data, indent=2))
        return 0
    inert = [k for k in judged if k.inert]
    if not inert:
        say(
            f"No inert knob among {len(judged)} judged (flag, workload) pair(s): a knob is inert "
            f"when an experiment with repeats found every value within ±{margin * 100:g} % on "
            f"{', '.join(WATCHED)} and none found a difference."
        )
        return 0
    watched = ", ".join(map(metric_label, WATCHED))
    say(f"Inert knobs (every value within ±{margin * 100:g} % on {watched}):")
    for k in inert:
        say(
            f"  {k.param} on workload {k.fingerprint} ({k.workload_text}): values "
            f"{', '.join(k.values)} vs {k.reference}; experiments "
            f"{', '.join(map(str, k.equivalent))}"
        )
    return 0
