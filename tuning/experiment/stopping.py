"""A server's stop begun in the background as soon as its last load has ended, so that storing the
run and stopping its server go on side by side; the next start joins it first.

Never two engines at once: the stop is the same as ever (the group gone, the port free, the device
memory back to the baseline) and whoever starts the next server calls `join` before it launches,
which returns only when all of it is done and raises what the stop raised (a server that outlived
SIGKILL stops the next start as it always did).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class BackgroundStop:
    """`stop()` run once on a thread of its own; `join()` waits for it and re-raises its error."""

    def __init__(self, stop: Callable[[], None]) -> None:
        self._stop = stop
        self._error: BaseException | None = None
        self.began = time.monotonic()
        self.ended: float | None = None
        self._thread = threading.Thread(target=self._run, name="server-stop", daemon=False)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._stop()
        except BaseException as exc:  # noqa: BLE001 (handed to whoever joins, in its thread)
            self._error = exc
        finally:
            self.ended = time.monotonic()

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> float:
        """Wait until the stop is done; the seconds it ran before this call (its overlap with
        what the caller did meanwhile). Raises the stop's own error."""
        called = time.monotonic()
        self._thread.join()
        ended = self.ended if self.ended is not None else time.monotonic()
        error, self._error = self._error, None
        if error is not None:
            raise error
        return max(0.0, min(called, ended) - self.began)
