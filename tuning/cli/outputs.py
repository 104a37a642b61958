"""Whether a command's output file can be written, asked before the command does any work.

`plan --out /proc/self/mem` used to fail after every run of the plan. Each output flag (`--out`,
the one name of a command's file) is checked first: an existing folder, device or /proc entry
is refused, and the nearest folder that exists must take a new file (tried with a probe file that
is removed at once: permission bits say nothing to root, a read-only mount or /proc). A missing
folder is not created here; the writer creates it when it writes, so a refusal leaves nothing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

# (command, the argparse attribute, the flag) of every file a command writes.
OUTPUTS: tuple[tuple[str, str, str], ...] = (
    ("plan", "out", "--out"),
    ("report", "out", "--out"),
    ("export", "out", "--out"),
    ("chart", "out", "--out"),
    ("bench", "out", "--out"),
)


def _nearest_existing(path: Path) -> Path:
    for folder in path.parents:
        if folder.exists():
            return folder
    return Path(path.anchor or ".")


def unwritable(flag: str, target: str | Path, db: Path | None = None) -> str | None:
    """Why `target` cannot be written as `flag`'s file, or None."""
    path = Path(target).expanduser()
    absolute = Path(os.path.abspath(path))
    if path.is_dir():
        return f"{flag} {path}: is a folder; name a file in it"
    if path.exists() and not path.is_file():
        return f"{flag} {path}: is not a regular file (a device or a pipe); name a file"
    if db is not None and absolute == Path(os.path.abspath(db)):
        return f"{flag} {path}: is the lab's database; name another file"
    folder = _nearest_existing(absolute)
    if not folder.is_dir():
        return f"{flag} {path}: {folder} is a file, not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tuning-lab-probe-"):
            pass
    except OSError as exc:
        return f"{flag} {path}: cannot create a file in {folder} ({exc.strerror or exc})"
    return None


def output_problem(args: argparse.Namespace, db: Path | None = None) -> str | None:
    """The first output flag of this command that names a file it could not write."""
    for command, attr, flag in OUTPUTS:
        target = getattr(args, attr, None)
        if args.command == command and target and (why := unwritable(flag, target, db)):
            return why
    return None
