"""A real process tree shaped like vLLM's: a python parent (the API server) with one child (the
EngineCore) that allocates memory on demand, for the samplers to measure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from types import TracebackType

ALLOC_MB = 80


# The child waits for a line on stdin, then allocates (and touches) ALLOC_MB and holds it.
CHILD = f"""
import os, sys, time
print(os.getpid(), flush=True)
sys.stdin.readline()
data = b"x" * ({ALLOC_MB} << 20)
print("ready", flush=True)
time.sleep(120)
"""


PARENT = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}])
sys.exit(child.wait())
"""


class Tree:
    """A python parent (like vLLM's API server) with one child (like EngineCore)."""

    def __init__(self) -> None:
        self.parent = subprocess.Popen(
            [sys.executable, "-c", PARENT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        assert self.parent.stdout is not None
        self.child_pid = int(self.parent.stdout.readline())
        self.pid = self.parent.pid

    def allocate(self) -> None:
        assert self.parent.stdin is not None and self.parent.stdout is not None
        self.parent.stdin.write("go\n")
        self.parent.stdin.flush()
        assert self.parent.stdout.readline().strip() == "ready"

    def kill(self) -> None:
        try:
            os.killpg(self.pid, signal.SIGKILL)  # the group we started, nothing else
        except ProcessLookupError:
            pass
        self.parent.wait(timeout=10)
        for stream in (self.parent.stdin, self.parent.stdout):
            if stream is not None:
                stream.close()

    def __enter__(self) -> Tree:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.kill()
