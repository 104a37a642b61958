"""Private scratch folders for export and import that do not outlive their process.

An import or export unpacks or builds a SQLite file in a temporary folder. A `finally` removes it,
but SIGTERM's default action ends the process without running any `finally`, which left a 115 MB
file behind per interrupted import. While a scratch folder is open on the main thread, SIGTERM
(when nobody else handles it) raises SystemExit instead, so the folder is removed and an open
write transaction rolls back; folders of processes that died by SIGKILL are swept by the next
import or export (their name carries the pid).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

PREFIX = "bundle-scratch-"


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


@contextmanager
def sigterm_exits() -> Iterator[None]:
    """SIGTERM raises SystemExit in this block (main thread, default handler only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous not in (signal.SIG_DFL, None):
        yield  # the program handles SIGTERM itself (a runner, Streamlit): leave it alone
        return
    signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _pid_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def sweep_orphans(root: Path | None = None) -> int:
    """Remove scratch folders whose process is gone (killed with SIGKILL); returns how many."""
    base = Path(root or tempfile.gettempdir())
    removed = 0
    for path in base.glob(f"{PREFIX}*-*"):
        pid_text = path.name[len(PREFIX) :].split("-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and _pid_gone(int(pid_text)):
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


@contextmanager
def scratch_dir(kind: str) -> Iterator[Path]:
    """A fresh private folder, removed on exit, on any exception and on SIGTERM."""
    with sigterm_exits():
        sweep_orphans()
        tmp = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-{kind}-"))
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
