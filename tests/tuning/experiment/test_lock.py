"""The machine lock: one experiment at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuning.experiment.lock import RunnerBusy, machine_lock


def test_one_experiment_at_a_time(lab_home: Path) -> None:
    with machine_lock(), pytest.raises(RunnerBusy), machine_lock():
        pass
