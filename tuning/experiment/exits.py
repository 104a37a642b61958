"""How the runner leaves, whatever happens: SIGTERM unwinds like Ctrl-C, a second signal during
clean-up waits until the server is stopped and the statuses are written, and a terminal status
write is retried rather than lost to a locked DB."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

WRITE_RETRIES = 6  # a terminal status is retried with backoff: it must not be lost to a lock


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised in the runner's main thread like Ctrl-C's KeyboardInterrupt."""


def signal_name(exc: BaseException | None) -> str:
    return "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT (Ctrl-C)"


def retry(write: Callable[[], None]) -> None:
    """A write that must happen (a terminal status): retried with backoff, the last error raised."""
    for attempt in range(WRITE_RETRIES):
        try:
            write()
            return
        except Exception as exc:  # noqa: BLE001 (a locked DB: wait and try again)
            if attempt == WRITE_RETRIES - 1:
                raise
            print(f"runner: final write failed, retrying: {exc}", file=sys.stderr, flush=True)
            time.sleep(0.25 * 2**attempt)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """SIGTERM raises Interrupted in the main thread, so it unwinds like Ctrl-C (the server is
    stopped and every row gets a terminal status) instead of ending the process on the spot."""
    if not _main_thread():
        yield
        return

    def interrupt(signum: int, frame: object) -> None:
        raise Interrupted()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextmanager
def signals_deferred() -> Iterator[None]:
    """While the runner cleans up, a second Ctrl-C or SIGTERM is noted, not obeyed: stopping the
    server and writing the statuses take seconds and must not be cut short."""
    if not _main_thread():
        yield
        return
    seen: list[int] = []
    previous = {
        sig: signal.signal(sig, lambda signum, frame: seen.append(signum))
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if seen:
            print("runner: a signal came while stopping; stopped cleanly first", file=sys.stderr)
