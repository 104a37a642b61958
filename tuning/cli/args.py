"""Flags and messages several commands share: where the lab's DB is, which runs a command is
about, and how a refusal is said."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from store import snapshot
from tuning.settings import default_db_path

if TYPE_CHECKING:
    # What `sub.add_parser` hangs off (argparse has no public name for it).
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db", type=Path, default=None, help=f"the lab's SQLite file (default {default_db_path()})"
    )


def db_path(args: argparse.Namespace) -> Path:
    return snapshot.expanded(Path(args.db)) if args.db else default_db_path()


def add_selection(p: argparse.ArgumentParser, runs_help: str = "runs to include") -> None:
    """RUN_ID ... and --experiment ID (repeatable): the runs a command is about; --db too."""
    p.add_argument("run_ids", nargs="*", type=int, metavar="RUN_ID", help=runs_help)
    p.add_argument(
        "--experiment",
        type=int,
        action="append",
        default=None,
        metavar="ID",
        help="every run of this experiment (repeatable; added to RUN_IDs)",
    )
    add_db(p)


def refused(message: str) -> int:
    """Say why nothing was done; exit code 2."""
    print(f"refused: {message}", file=sys.stderr)
    return 2
