"""What the CLI process does at its edges, whatever the command: a reader that closed the pipe
(`tuning-lab runs | head -1`) ends it quietly, and each warning a library logs is said once per
process (the NVML warning of every run's sampler was printed once per run)."""

from __future__ import annotations

import logging
import os
import sys
from typing import TextIO

# `runs | head -1`: the reader is gone, the output was wanted no further. Like coreutils and gh,
# the process ends quietly with the shell's code for SIGPIPE (128 + 13), never a traceback.
EXIT_CLOSED_PIPE = 141


def quiet_closed_pipe() -> int:
    """After a BrokenPipeError on stdout: point stdout at /dev/null so the interpreter's final
    flush cannot raise again (Python's documented recipe), and return EXIT_CLOSED_PIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a real file (a test's capture)
        pass
    return EXIT_CLOSED_PIPE


class OncePerProcess(logging.Filter):
    """Lets each distinct warning through once: the same logger, level and text again is dropped.
    Debug and info records pass as they are (they are not shown by default)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        key = (record.name, record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


class _Stderr(logging.StreamHandler):
    """Writes to sys.stderr as it is at each record (as logging's last-resort handler does)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def warnings_once() -> None:
    """Library warnings (the lab's loggers log, never print) go to stderr as one plain line each,
    as Python's last-resort handler printed them, but each only once in this process. A program
    that configured logging itself (pytest, an embedding tool) keeps its own handlers."""
    root = logging.getLogger()
    if root.handlers:
        return
    handler = _Stderr()
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.addFilter(OncePerProcess())
    root.addHandler(handler)
