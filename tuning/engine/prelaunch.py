"""A server spawned ahead ("prelaunched"): its Python imports done while the previous server
stops, the server itself run only when `release()` says go.

Most of a warm restart is Python starting (the API server's imports alone 17-21 s of a 50-65 s GPU
start), and none of it needs the device. The launcher (`assets/prelaunch.py`, run by the engine's
own interpreter) imports the entry point's modules, says so in the log with the seconds it took,
and waits for "go" on stdin; only then does vLLM parse its arguments, bind its port and touch the
device. Whoever prelaunches releases the server once the previous one's port and device memory
are free: never two engines holding device memory at once.

What a user sees for a plain start stays the number: a prelaunched start's time to healthy is its
imports (spawn to the launcher's line) plus go to healthy, the seconds it waited for go left out;
its startup anatomy has the imports as its first phase, then the engine's milestones from go.

A command the launcher cannot wrap (not `<python> -m MODULE`, `<python> FILE.py` or a known console
script) is never prelaunched, nor any when the setting `prelaunch` (TUNING_LAB_PRELAUNCH) is off.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from tuning.engine.launch import Launch
from tuning.engine.server import ServerProcess, StartupFacts
from tuning.settings import load_settings

LAUNCHER = Path(__file__).with_name("assets") / "prelaunch.py"
# A console script -> (its entry point, modules it imports only inside main(), best effort: vLLM's
# cli/main.py imports its subcommands lazily, and `serve`'s pulls in the engine and the API server).
CONSOLE_SCRIPTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "vllm": ("vllm.entrypoints.cli.main:main", ("vllm.entrypoints.cli.serve",)),
}
OFF_WORDS = frozenset({"0", "off", "false", "no"})
_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_IMPORTED = re.compile(rb"tuning-lab prelaunch: imports took ([\d.]+) s \(monotonic ([\d.]+)\)")
_GO = re.compile(rb"tuning-lab prelaunch: go \(monotonic ([\d.]+)\)")
# The launcher's lines come before the server's own: this much of the log's head is read for them.
HEAD_BYTES = 4 << 20


def enabled() -> bool:
    """The setting `prelaunch` (TUNING_LAB_PRELAUNCH): on unless 0/off/false/no."""
    return load_settings().prelaunch.strip().lower() not in OFF_WORDS


def _is_python(path: str) -> bool:
    return bool(_PYTHON.fullmatch(Path(path).name))


def _script_python(script: str) -> str | None:
    """The interpreter of a console script: its shebang's, when that is a python."""
    try:
        with open(script, "rb") as fh:
            first = fh.readline(4096).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if first.startswith("#!"):
        words = first[2:].split()
        if words and _is_python(words[0]):
            return words[0]
    return None


def wrap(argv: list[str]) -> list[str] | None:
    """The launcher's argv for `argv`, or None when the launcher cannot wrap it."""
    if len(argv) >= 3 and _is_python(argv[0]) and argv[1] == "-m":
        return [argv[0], str(LAUNCHER), "--module", argv[2], "--", *argv[3:]]
    if len(argv) >= 2 and _is_python(argv[0]) and argv[1].endswith(".py"):
        return [argv[0], str(LAUNCHER), "--script", argv[1], "--", *argv[2:]]
    known = CONSOLE_SCRIPTS.get(Path(argv[0]).name) if argv else None
    python = _script_python(argv[0]) if known else None
    if known and python:
        entry, also = known
        extra = [word for name in also for word in ("--also", name)]
        return [
            python,
            str(LAUNCHER),
            "--entry",
            entry,
            "--argv0",
            argv[0],
            *extra,
            "--",
            *argv[1:],
        ]
    return None


@dataclass(frozen=True)
class LauncherLines:
    """What the launcher's lines said, on `time.monotonic()`: the imports' seconds (its own
    clock) and when they were done, and when it went (None: not yet)."""

    imports_s: float
    imported_at: float
    went_at: float | None = None


def read_marks(log_path: Path) -> LauncherLines | None:
    """The launcher's lines in the head of a log; None before its imports line."""
    try:
        with open(log_path, "rb") as fh:
            head = fh.read(HEAD_BYTES)
    except OSError:
        return None
    imported = _IMPORTED.search(head)
    if imported is None:
        return None
    went = _GO.search(head, imported.end())
    return LauncherLines(
        float(imported.group(1)),
        float(imported.group(2)),
        float(went.group(1)) if went else None,
    )


def as_plain_start(
    healthy_s: float, stamps: dict[str, float], imported_s: float, went_s: float
) -> tuple[float, dict[str, float]]:
    """(time to healthy, milestone stamps) of a prelaunched start as a plain start's: the imports
    (`imported_s` after the spawn), then everything from go (`went_s` after the spawn) on; the
    seconds between were spent waiting for go, not starting."""
    went_s = max(went_s, imported_s)
    shifted = {
        key: round(imported_s + max(0.0, at - went_s), 3)
        for key, at in stamps.items()
        if key != "prelaunch_imports"
    }
    return round(imported_s + max(0.0, healthy_s - went_s), 3), {
        "prelaunch_imports": round(imported_s, 3),
        **shifted,
    }


class PrelaunchedServer(ServerProcess):
    """A `ServerProcess` whose `start()` spawns the launcher, which imports and waits; `release()`
    lets it run the server. `wait_healthy` only after `release`."""

    def __init__(self, launch: Launch, log_path: Path):
        super().__init__(launch, log_path)
        wrapped = wrap(launch.argv)
        if wrapped is None:
            raise ValueError(f"the launcher cannot wrap {launch.argv[:3]}")
        self.wrapped = wrapped
        self.marks: LauncherLines | None = None

    def command(self) -> list[str]:
        return self.wrapped

    def stdin(self) -> int:
        return subprocess.PIPE

    def release(self) -> None:
        """Go: the launcher runs the server (one that already exited says why when waited for)."""
        if self.released_at is not None or self.proc is None:
            return
        self.released_at = time.monotonic()
        pipe: IO[bytes] | None = self.proc.stdin
        if pipe is None:
            return
        try:
            pipe.write(b"go\n")
            pipe.flush()
        except OSError:  # it exited (an import failed): wait_healthy reads why
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def wait_healthy(
        self, timeout: float = 300.0, on_poll: Callable[[float], None] | None = None
    ) -> StartupFacts:
        if self.released_at is None:
            raise RuntimeError("a prelaunched server is waited for only after release()")
        facts = super().wait_healthy(timeout, on_poll)
        facts.anatomy["prelaunch"] = self.prelaunch_facts()
        return facts

    def hidden_s(self) -> float:
        """Seconds of the start done before `release` (spawn and imports while the previous
        server stopped and its run stored): what the overlap saved."""
        marks = self.marks or read_marks(self.log_path)
        if self.started_at is None or self.released_at is None:
            return 0.0
        done = marks.imported_at if marks is not None else self.released_at
        return round(max(0.0, min(done, self.released_at) - self.started_at), 3)

    def startup_times(
        self, healthy_s: float, stamps: dict[str, float]
    ) -> tuple[float, dict[str, float]]:
        marks = self.marks = read_marks(self.log_path)
        if marks is None or self.started_at is None:
            return healthy_s, stamps
        imported_s = marks.imported_at - self.started_at
        went = marks.went_at if marks.went_at is not None else self.released_at
        went_s = (went or marks.imported_at) - self.started_at
        return as_plain_start(healthy_s, stamps, imported_s, went_s)

    def prelaunch_facts(self) -> dict[str, Any]:
        """For the startup anatomy: the launcher's lines and the seconds hidden by the overlap."""
        out: dict[str, Any] = asdict(self.marks) if self.marks else {}
        return {**out, "hidden_s": self.hidden_s()}
