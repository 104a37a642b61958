"""Planning an experiment: a server the lab did not start cannot sweep a parameter that needs a
server restart (the run order is tested in test_order)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.factories import plan_attached
from tuning.measure.traffic.workload import Workload


def test_attached_server_refuses_server_parameters(lab_home: Path) -> None:
    wl = Workload(num_requests=4, concurrency=2, input_len=4, output_len=4)
    with pytest.raises(ValueError, match="needs a server restart"):
        plan_attached(lab_home / "lab.db", "max-num-seqs", (2, 4), wl)
