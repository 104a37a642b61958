"""One experiment at a time per machine: two at once would measure each other (memory, cores,
GPU). A file lock, not a DB row, so it holds across lab databases and dies with its process.
The holder writes who it is into the lock file (its pid, lab DB and experiment), so every page
and command can name it, whichever lab they look at (tuning.decide.holder)."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

MAX_HOLDER_BYTES = 4096  # a holder record is a few dozen bytes; never read more


class RunnerBusy(RuntimeError):
    """Another experiment holds this machine's runner lock."""


def lock_path() -> Path:
    """One lock per machine and user (not per DB); TUNING_LAB_LOCK moves it (tests)."""
    override = os.environ.get("TUNING_LAB_LOCK")
    if override:
        return Path(override)
    return Path(tempfile.gettempdir()) / f"vllm-tuning-lab-{os.getuid()}.lock"


@contextmanager
def machine_lock(
    path: Path | None = None, holder: Mapping[str, Any] | None = None
) -> Iterator[None]:
    """Hold the lock for the block; RunnerBusy at once (no waiting) when another runner has it.
    `holder` (e.g. {"db": ..., "experiment": 3}) is written into the file with this pid."""
    target = path or lock_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunnerBusy("another experiment is running on this machine") from None
        try:
            fh.truncate(0)  # "a+" appends: after the truncate that is the file's start
            fh.write(json.dumps({**(holder or {}), "pid": os.getpid()}))
            fh.flush()
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def lock_holder(path: Path | None = None) -> dict[str, Any] | None:
    """Who holds the lock now: what its holder wrote ({} when it wrote nothing readable, as an
    older lab's runner does), or None when nobody holds it."""
    target = path or lock_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a+", encoding="utf-8", errors="replace") as fh:
        try:  # a probe that writes nothing: the file keeps the last holder's record
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            text = fh.read(MAX_HOLDER_BYTES)
        else:
            fcntl.flock(fh, fcntl.LOCK_UN)
            return None
    try:
        record = json.loads(text)
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def runner_busy() -> bool:
    """Is a runner working on this machine now (the page greys out its Start button)?"""
    return lock_holder() is not None
