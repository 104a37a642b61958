"""A private folder for each engine start's ZMQ sockets, removed once the server is gone.

vLLM binds the sockets between its API server and engine core at
`ipc://$VLLM_RPC_BASE_PATH/<uuid4>` (default: the system temp folder) and leaves the files behind
when its processes die by signal, as a stop in a tuning loop often does: 7 per start of the CPU
engine, 4,499 in our test machine's /tmp after ten hours of `make test`. Each start gets its own
folder (mode 0700) instead, removed when `ServerProcess.stop` or `server stop` is done with its
group, and by the reaper and a fleet worker's guard when they stop a server from outside
(`folder_of`). A folder left anyway (the lab killed itself; Ray killing a dead driver's servers
before their guard could stop them) is swept at a later start once none of its sockets is bound
any more (the kernel's /proc/net/unix) and it is older than STALE_AFTER_S. A
VLLM_RPC_BASE_PATH the user set is theirs: the lab neither replaces nor removes it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import psutil

VAR = "VLLM_RPC_BASE_PATH"
PREFIX = "vllm-lab-ipc-"
# A start binds its sockets within seconds of its folder being made; this long without a bound
# socket means the server is gone, not still importing.
STALE_AFTER_S = 600.0
_PROC_NET_UNIX = Path("/proc/net/unix")


def create() -> Path:
    """A new folder for one start's sockets, short enough for a socket path (108 bytes)."""
    return Path(tempfile.mkdtemp(prefix=PREFIX))


def remove(folder: str | os.PathLike[str] | None) -> None:
    """Remove a folder `create` made (anything else, a user's VLLM_RPC_BASE_PATH included, is
    left alone)."""
    if folder is not None and Path(folder).name.startswith(PREFIX):
        shutil.rmtree(folder, ignore_errors=True)


def folder_of(pid: int) -> Path | None:
    """The folder `create` made for a running server (from its environment), for whoever stops
    that server from outside: read it before the stop, remove it after."""
    try:
        value = psutil.Process(pid).environ().get(VAR)
    except psutil.Error:
        return None
    return Path(value) if value and Path(value).name.startswith(PREFIX) else None


def bound_paths() -> set[str] | None:
    """Paths of the Unix sockets bound now, or None where the kernel does not say."""
    try:
        lines = _PROC_NET_UNIX.read_text().splitlines()[1:]
    except OSError:
        return None
    # Num RefCount Protocol Flags Type St Inode [Path]: the path is the eighth field, if any.
    return {f[7] for f in (line.split(maxsplit=7) for line in lines) if len(f) == 8}


def sweep(now: float | None = None) -> list[Path]:
    """Remove this user's folders that no live server uses any more; the folders removed."""
    bound = bound_paths()
    if bound is None:
        return []
    now = time.time() if now is None else now
    removed = []
    for folder in Path(tempfile.gettempdir()).glob(PREFIX + "*"):
        try:
            info = folder.stat()
            inside = [str(p) for p in folder.iterdir()]
        except OSError:
            continue
        if info.st_uid != os.getuid() or now - info.st_mtime < STALE_AFTER_S:
            continue
        if not any(p in bound for p in inside):
            remove(folder)
            removed.append(folder)
    return removed
