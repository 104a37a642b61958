"""Planning an experiment: repeats interleave, and a server the lab did not start cannot sweep a
parameter that needs a server restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import plan_attached
from tuning.experiment.plan import schedule
from tuning.workload import Workload


def test_schedule_interleaves_repeats() -> None:
    assert schedule([2, 16], 3) == [(2, 0), (16, 0), (2, 1), (16, 1), (2, 2), (16, 2)]


def test_attached_server_refuses_server_parameters(lab_home: Path) -> None:
    wl = Workload(num_requests=4, concurrency=2, input_len=4, output_len=4)
    with pytest.raises(ValueError, match="needs a server restart"):
        plan_attached(lab_home / "lab.db", "max-num-seqs", (2, 4), wl)
