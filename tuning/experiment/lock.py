"""One experiment at a time per machine: two at once would measure each other (memory, cores,
GPU). A file lock, not a DB row, so it holds across lab databases and dies with its process."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class RunnerBusy(RuntimeError):
    """Another experiment holds this machine's runner lock."""


def lock_path() -> Path:
    """One lock per machine and user (not per DB); TUNING_LAB_LOCK moves it (tests)."""
    override = os.environ.get("TUNING_LAB_LOCK")
    if override:
        return Path(override)
    return Path(tempfile.gettempdir()) / f"vllm-tuning-lab-{os.getuid()}.lock"


@contextmanager
def machine_lock(path: Path | None = None) -> Iterator[None]:
    """Hold the lock for the block; RunnerBusy at once (no waiting) when another runner has it."""
    target = path or lock_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunnerBusy("another experiment is running on this machine") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def runner_busy() -> bool:
    """Is a runner working on this machine now (the page greys out its Start button)?"""
    try:
        with machine_lock():
            return False
    except RunnerBusy:
        return True
