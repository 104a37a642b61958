"""The samplers of the server the runner is measuring, and the DB connection their rows go
through: one recorder at a time, retargeted when a reused server's samples belong to the next run,
and its connection closed when it stops; what it lost since the current run began (`loss`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlite_utils import Database

from core.records import SampleRow
from store import open_db, repo
from tuning.measure.telemetry.completeness import SampleLoss
from tuning.measure.telemetry.recorder import Sampler, Telemetry


class RunSamples:
    """Telemetry for one run at a time; `on_finish(run_id)` runs once its samplers stopped."""

    def __init__(self, db_path: Path, on_finish: Callable[[int], None]) -> None:
        self.db_path = db_path
        self.on_finish = on_finish
        self.run_id: int | None = None
        self._telemetry: Telemetry | None = None
        self._db: Database | None = None
        self._before = SampleLoss()  # the recorder's losses when the current run began
        self._last = SampleLoss()  # what the last stopped recorder lost in its last run

    @property
    def active(self) -> bool:
        return self._telemetry is not None

    def _sink(self, rows: list[SampleRow]) -> None:
        """Called on the recorder's flusher thread only, with the connection opened for it."""
        run_id = self.run_id
        if run_id is not None and rows and self._db is not None:
            repo.insert_samples(self._db, run_id, rows)

    def start(self, run_id: int, t0: float, samplers: list[Sampler]) -> None:
        """Samples for `run_id` from now on, written by the recorder's flusher thread through a
        connection of its own; `finish` closes it."""
        self.finish()
        self._db = open_db(self.db_path)
        self.run_id = run_id
        self._telemetry = Telemetry(origin=t0)
        self._before = SampleLoss()
        self._telemetry.start(samplers, self._sink)

    def add(self, sampler: Sampler) -> None:
        if self._telemetry is not None:
            self._telemetry.add(sampler)

    def retarget(self, run_id: int) -> None:
        """A reused server's samples belong to this run now."""
        if self._telemetry is not None:
            self.run_id = run_id
            self._before = self._telemetry.loss()

    def flush(self) -> None:
        if self._telemetry is not None:
            self._telemetry.flush()

    def loss(self) -> SampleLoss:
        """What the current run's samples lack so far (after flush() or finish(): what its stored
        series lack); nothing when no recorder ran."""
        if self._telemetry is None:
            return self._last
        return self._telemetry.loss().since(self._before)

    def finish(self) -> None:
        if self._telemetry is not None:
            self._telemetry.stop()
            self._last = self._telemetry.loss().since(self._before)
            self._telemetry = None
            if self.run_id is not None:
                self.on_finish(self.run_id)
        if self._db is not None:
            self._db.conn.close()
            self._db = None
