"""Resident engines on a CPU vLLM (issue 38, item 4): park a server the lab started by PAUSING its
process group (SIGSTOP), and wake it by continuing it (SIGCONT) and one `/health` answered.

A CPU vLLM has no sleep mode, but a paused server uses no CPU at all: while one is paused only
the server in hand runs, so two servers never compete for the cores (the sleep-mode rule "never
two awake" holds the same way). A paused server keeps its RAM, so a second one needs room beside
it: `why_short` compares the RAM available with the first server's measured process-tree RSS
and a margin, and says the numbers when it is short. Nothing in the server's configuration
changes (no sleep-mode flag, no dev endpoints): a paused server's runs are the same configuration
as a restarted one's.

A server is paused only once its load has drained (`drain`: no request running or waiting), and
each switch checks what it did: the paused leader's status is `stopped`, the woken one's is not.
Whatever stops a server continues its group right after the SIGTERM
(tuning.engine.procs.continue_group), since a stopped process acts on SIGTERM only once
continued.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error

import psutil
from prometheus_client.parser import text_string_to_metric_families

from tuning.engine.procs import continue_group
from tuning.engine.server import http_get

RAM_MARGIN = 0.25  # room asked for a second server beyond the first's RSS (its growth under load)
STATUS_WAIT_S = 5.0  # how long a group may take to show it stopped or runs again
DRAIN_WAIT_S = 10.0  # how long a server's requests may take to end before it is paused
READY_WAIT_S = 30.0  # how long a continued server may take to answer /health
POLL_S = 0.01
SYSTEM = os.name  # "posix" where process groups can be paused
IN_FLIGHT = ("vllm:num_requests_running", "vllm:num_requests_waiting")


class PauseError(RuntimeError):
    """A server did not pause or continue as asked (requests in flight, a status, no /health)."""


def pausable() -> str | None:
    """Why this system cannot pause a process group (not POSIX); None when it can."""
    if SYSTEM != "posix" or not hasattr(signal, "SIGSTOP"):
        return f"pausing a server needs a POSIX system (SIGSTOP / SIGCONT); this is {SYSTEM}"
    return None


def tree_rss(pid: int) -> int:
    """The resident memory of `pid` and all its descendants, in bytes (0 when it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for proc in procs:
        try:
            total += int(proc.memory_info().rss)
        except psutil.Error:
            continue
    return total


def available_ram() -> int:
    """Bytes of RAM available to a new process now (psutil's `available`)."""
    return int(psutil.virtual_memory().available)


def why_short(first_rss: int, available: int, margin: float = RAM_MARGIN) -> str | None:
    """Why a second server does not fit beside a paused one (with the numbers); None when it
    does (a paused server keeps its RAM)."""
    need = int(first_rss * (1 + margin))
    if first_rss <= 0 or available >= need:
        return None
    gib = 2**30
    return (
        f"RAM for a second server: {available / gib:.2f} GiB available, the first server holds "
        f"{first_rss / gib:.2f} GiB (+{margin:.0%} margin: {need / gib:.2f} GiB needed)"
    )


def requests_in_flight(base_url: str) -> int | None:
    """Requests running or waiting on the server now (its /metrics); None when it does not say."""
    try:
        status, text = http_get(base_url.rstrip("/") + "/metrics", timeout=5.0)
    except (OSError, urllib.error.URLError):
        return None
    if status != 200:
        return None
    total, seen = 0.0, False
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in IN_FLIGHT:
                    total += sample.value
                    seen = True
    except ValueError:
        return None
    return round(total) if seen else None


def drain(base_url: str, timeout: float = DRAIN_WAIT_S) -> float:
    """Wait until no request is in flight on the server; the seconds it took. PauseError when
    some are still there after `timeout` (pausing then would freeze them into the next run)."""
    t0 = time.monotonic()
    while (left := requests_in_flight(base_url)) not in (0, None):
        if time.monotonic() - t0 > timeout:
            raise PauseError(f"{left} request(s) still in flight {timeout:.0f} s after its load")
        time.sleep(0.05)
    return time.monotonic() - t0


def is_stopped(pid: int) -> bool:
    """Whether the process is paused (psutil status `stopped`)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


def _until(pid: int, stopped: bool, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while is_stopped(pid) is not stopped:
        if time.monotonic() > deadline:
            word = "stopped" if stopped else "running"
            raise PauseError(f"server pid {pid} not {word} {timeout:.0f} s after its signal")
        time.sleep(POLL_S)


def pause(pgid: int, timeout: float = STATUS_WAIT_S) -> float:
    """SIGSTOP the group; the seconds until its leader's status is `stopped`."""
    t0 = time.monotonic()
    try:
        os.killpg(pgid, signal.SIGSTOP)
    except (ProcessLookupError, PermissionError) as exc:
        raise PauseError(f"pausing process group {pgid}: {exc}") from None
    _until(pgid, True, timeout)
    return time.monotonic() - t0


def resume(pgid: int, base_url: str, timeout: float = READY_WAIT_S) -> float:
    """SIGCONT the group, check its leader runs, then one /health answered; the seconds it took."""
    t0 = time.monotonic()
    continue_group(pgid)
    _until(pgid, False, min(timeout, STATUS_WAIT_S))
    url = base_url.rstrip("/") + "/health"
    while True:
        try:
            status, _ = http_get(url, timeout=max(0.5, timeout - (time.monotonic() - t0)))
        except (OSError, urllib.error.URLError):
            status = 0
        if status == 200:
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            raise PauseError(f"/health did not answer 200 {timeout:.0f} s after continuing")
        time.sleep(POLL_S)
