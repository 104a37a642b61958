"""`experiment --reuse / --no-reuse`: earlier runs that measured exactly what a planned run would
are offered before anything starts; they count only when the user says so (never silently)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tuning.cli.args import say

OFFER_TAIL = ": --reuse to count them, --no-reuse to run anyway"


def add_reuse_arguments(p: argparse.ArgumentParser) -> None:
    choice = p.add_mutually_exclusive_group()
    choice.add_argument(
        "--reuse",
        action="store_true",
        help="count earlier runs with this run's exact fingerprint (engine command and its "
        "arguments, model path or hub id and its config.json, load format, vLLM version, flags, "
        "environment knobs, hardware, workload; this lab and the team folder's bundles whose "
        "integrity holds) toward the repeats; only the missing runs are measured",
    )
    choice.add_argument(
        "--no-reuse", action="store_true", help="measure every run even when earlier ones match"
    )


def offer_reuse(args: argparse.Namespace, path: Path, exp_id: int) -> dict[str, Any]:
    """Say the offer for planned experiment `exp_id` on stderr and act on the user's choice;
    what `--json` carries under `reuse`."""
    from store import connect, queries
    from tuning.experiment.reuse import apply_offer, find_offer
    from tuning.settings import load_settings

    with connect(path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
    offer = find_offer(path, exp, team_folder=load_settings().team_folder or None)
    choice = "reuse" if args.reuse else "no-reuse" if args.no_reuse else "none"
    out: dict[str, Any] = {**offer.to_json(), "choice": choice, "reused_run_ids": []}
    for line in offer.lines():
        say(line + OFFER_TAIL, file=sys.stderr)
    if offer.count and args.reuse:
        out["reused_run_ids"] = copies = apply_offer(path, exp_id, offer)
        say(
            f"experiment {exp_id}: counted {len(copies)} earlier run(s) as reused evidence; "
            f"only the {max(0, int(exp['runs_total'] or 0) - len(copies))} missing run(s) "
            "are measured",
            file=sys.stderr,
        )
    elif offer.count:
        why = "--no-reuse" if args.no_reuse else "no --reuse given"
        say(
            f"experiment {exp_id}: did not reuse them ({why}): every run is measured",
            file=sys.stderr,
        )
    for note in offer.notes:
        say(f"note: {note}", file=sys.stderr)
    out["notes"] = offer.notes
    return out
