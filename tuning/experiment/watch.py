"""The runner's two watchers, each a thread that must not die of one bad moment.

`Heartbeat` writes the live fields every 2 s and reads the Stop flag; a failed write (a locked DB)
is logged and retried on the next beat, and after a few in a row its connection is reopened, so
one error never leaves a runner that cannot be stopped. `EngineWatch` watches a started server
during its load: the API process, the EngineCore process and `/health`; when the engine dies while
the API server stays up (vLLM answers 503), it says so and stops the load early.
"""

from __future__ import annotations

import sys
import threading
import urllib.error
from collections.abc import Callable
from pathlib import Path

from sqlite_utils import Database

from store import open_db
from tuning.engine.procs import pid_alive
from tuning.engine.server import ServerProcess, http_get

REOPEN_AFTER = 3  # failed beats in a row before the heartbeat opens a fresh connection
HEALTH_FAILS = 2  # /health answers other than 200 in a row before the engine counts as dead


class Heartbeat:
    """Call `beat(db)` every `period` seconds on a thread of its own, whatever it raises."""

    def __init__(
        self, db_path: Path, beat: Callable[[Database], None], period: float = 2.0
    ) -> None:
        self.db_path = db_path
        self.beat = beat
        self.period = period
        self.failures = 0  # in a row; tests and the log read it
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._thread.join(timeout)

    def _loop(self) -> None:
        db: Database | None = None
        try:
            while not self._stop.wait(self.period):
                try:
                    if db is None:
                        db = open_db(self.db_path)
                    self.beat(db)
                    self.failures = 0
                except Exception as exc:  # noqa: BLE001 (a beat must never end the heartbeat)
                    self.failures += 1
                    print(
                        f"heartbeat: write failed ({self.failures} in a row), retrying: "
                        f"{type(exc).__name__}: {exc}",
                        file=sys.stderr,
                        flush=True,
                    )
                    if self.failures % REOPEN_AFTER == 0 and db is not None:
                        _close(db)
                        db = None
        finally:
            if db is not None:
                _close(db)


def _close(db: Database) -> None:
    try:
        db.conn.close()
    except Exception:  # noqa: BLE001 (closing a broken connection may fail too)
        pass


class EngineWatch:
    """Poll a started server during its load; `died` holds why the engine is gone, else None.

    `stop_load` is set when the engine dies (the load stops early instead of failing request after
    request) and, through `cancel`, when the user asks to stop.
    """

    def __init__(
        self,
        server: ServerProcess,
        cancel: threading.Event,
        stop_load: threading.Event,
        period: float = 0.5,
    ) -> None:
        self.server = server
        self.cancel = cancel
        self.stop_load = stop_load
        self.period = period
        self.died: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="engine-watch", daemon=True)

    def __enter__(self) -> EngineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join(5)

    def _engine_pids(self) -> dict[str, int]:
        pids = self.server.facts.engine_pids or {}
        return {name: pid for name, pid in pids.items() if name.startswith("EngineCore")}

    def check(self) -> str | None:
        """Why the engine is gone, or None while it serves."""
        if not self.server.alive():
            code = self.server.proc.returncode if self.server.proc else None
            return f"the API server exited with code {code} during the load"
        for name, pid in self._engine_pids().items():
            if not pid_alive(pid):
                return f"the engine process ({name} pid {pid}) exited during the load"
        return None

    def verdict(self) -> str | None:
        """Why the engine is gone, looked at once more after the load: requests that fail at once
        (HTTP 500 from an API server whose engine died) can end the load before the next poll."""
        if self.died is None:
            try:
                self.died = self.check()
            except Exception:  # noqa: BLE001 (a probe that fails says nothing about the engine)
                pass
        return self.died

    def _loop(self) -> None:
        bad = 0
        while not self._done.wait(self.period):
            if self.cancel.is_set():
                self.stop_load.set()
            try:
                reason = self.check()
                if reason is None:
                    status, _ = http_get(self.server.launch.base_url + "/health", timeout=2.0)
                    bad = 0 if status == 200 else bad + 1
                    if bad >= HEALTH_FAILS:
                        reason = f"/health answered {status} during the load (engine dead)"
            except (OSError, urllib.error.URLError):
                bad += 1
                reason = None
                if bad >= HEALTH_FAILS and not self.server.alive():
                    reason = "the API server stopped answering and exited"
            except Exception as exc:  # noqa: BLE001 (a watcher must not die of a probe)
                print(f"engine watch: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                continue
            if reason is not None:
                self.died = reason
                self.stop_load.set()
                return


def serving(server: ServerProcess) -> bool:
    """Alive and answering /health 200: a server whose engine died is not reused."""
    if not server.alive():
        return False
    try:
        return http_get(server.launch.base_url + "/health", timeout=5.0)[0] == 200
    except (OSError, urllib.error.URLError):
        return False
