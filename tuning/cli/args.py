"""Flags and messages several commands share: where the lab's DB is, which runs a command is
about, and how a refusal is said."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from tuning.settings import configured_db_path, default_db_path

# Exit codes, the same for every command (docs/reference/cli.md prints this table):
EXIT_OK = 0  # done
EXIT_FAILED = 1  # failed (a run, a server, a check), or refused (bad input, nothing done)
EXIT_REFUSED = 1
EXIT_USAGE = 2  # argparse: an unknown command or flag, a missing or malformed argument
# Ctrl-C (SIGINT) or SIGTERM: what ran is stored, the rest is cancelled (the shell's 128 + 2).
EXIT_INTERRUPTED = 130
EXIT_CODES = (
    (EXIT_OK, "done"),
    (
        EXIT_FAILED,
        "failed, or refused: a run or check failed, or the input was refused (one line "
        "on stderr says why; nothing was written), or what it names does not exist",
    ),
    (EXIT_USAGE, "usage: an unknown command or flag, a missing or malformed argument (argparse)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C or SIGTERM): what finished is stored"),
)

if TYPE_CHECKING:
    # What `sub.add_parser` hangs off (argparse has no public name for it).
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def add_db(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--db",
        type=Path,
        default=None,
        help=f"the lab's SQLite file (default {configured_db_path()})",
    )


def add_yes(p: argparse.ArgumentParser) -> None:
    from tuning.experiment.size import MAX_RUNS_UNASKED

    p.add_argument(
        "--yes",
        action="store_true",
        help=f"start it even when it asks for more than {MAX_RUNS_UNASKED} runs (without "
        "--yes such a request is refused before anything starts)",
    )


def db_path(args: argparse.Namespace) -> Path:
    from store import snapshot  # here: `--help` starts without sqlite-utils and pandas

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


def at_least_one(text: str) -> int:
    """An argparse type: a whole number >= 1 (`--repeats -5` is an error, never silently 1)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def base_url_problem(args: argparse.Namespace) -> str | None:
    """Why a command's --base-url cannot be used (no scheme, no host, `http://[::1:8000`), before
    anything is asked or written; None when it has none or it parses."""
    url = getattr(args, "base_url", None)
    if not url:
        return None
    from tuning.measure.traffic.workload import WorkloadError, server_root

    try:
        server_root(url)
    except WorkloadError as exc:
        return f"--base-url: {exc}"
    return None


def printable(text: object) -> str:
    """Text from data (a file name in the team folder, a teammate's author or host, a reason that
    quotes them) as it can be printed to a terminal: control characters (escape sequences that
    recolour, retitle or rewrite the terminal), line and paragraph separators and bidi overrides
    become visible escapes like `\\x1b`; printable text is unchanged."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


def say(text: object = "", *, file: TextIO | None = None, flush: bool = False) -> None:
    """The only way the CLI prints: every line through `printable`, so a name, note, tag or value
    from a DB or an imported bundle cannot move the cursor, clear or retitle the terminal
    (`\x1b[2J`, `\x1b]0;...\x07`); the line breaks of the CLI's own tables are kept."""
    lines = str(text).split("\n")
    print("\n".join(printable(line) for line in lines), file=file or sys.stdout, flush=flush)


def store_refusal(args: argparse.Namespace, exc: BaseException) -> str | None:
    """What to say when the lab's DB refused a command (damaged, read-only, on a full disk,
    written by a newer lab, locked for too long) or a file could not be written for want of
    space, or None for any other error."""
    import errno
    import sqlite3

    from store.db import StoreError, db_refusal, is_busy, locked_message
    from tuning.engine.procs import holders

    if isinstance(exc, StoreError):
        return str(exc)
    if isinstance(exc, sqlite3.DatabaseError):
        where = db_path(args) if hasattr(args, "db") else default_db_path()
        if is_busy(exc):
            return locked_message(where, exc, holders(where))
        return str(db_refusal(where, exc))  # read-only, full, or damaged: each named as it is
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        what = "read-only file system" if exc.errno == errno.EROFS else "full disk"
        return (
            f"{exc.filename or 'a file'}: not written, a {what} ({exc.strerror}); free space or "
            "choose another place and run the command again"
        )
    return None


def refused(message: str) -> int:
    """Say why nothing was done, one line on stderr; EXIT_REFUSED (1: usage errors alone are 2)."""
    say(f"refused: {message}", file=sys.stderr)
    return EXIT_REFUSED


def add_progress(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action="store_true",
        help="draw the progress bar even when stderr is not a terminal (by default it is drawn "
        "only on a terminal, so redirected output holds no carriage returns)",
    )


def show_progress(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """Whether to draw a progress bar: on a terminal, or when --progress asks."""
    if getattr(args, "progress", False):
        return True
    out = stream or sys.stderr
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False
