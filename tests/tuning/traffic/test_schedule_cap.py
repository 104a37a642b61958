"""Schedules of years are refused before they run (MAX_SCHEDULE_S), naming the field or the line;
the planned duration is in the preview (issue 22)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tuning.measure.traffic import (
    Arrival,
    DataError,
    LengthDist,
    MultiTurn,
    Source,
    TrafficError,
    WorkloadSpec,
    materialize,
    preview,
)
from tuning.measure.traffic.arrival import (
    MAX_SCHEDULE_S,
    ScheduleTooLong,
    gamma_offsets,
    trace_offsets,
)
from tuning.measure.traffic.materialize import check
from tuning.measure.traffic.workload import LocalTokenizer


def _trace(tmp_path: Path, gap_ms: float) -> Path:
    rows = [{"timestamp": t, "input_length": 8, "output_length": 4} for t in (0, 10, 10 + gap_ms)]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_tiny_rate_is_refused_not_run_for_ever() -> None:
    with pytest.raises(ScheduleTooLong, match=r"arrival.rate: 64 requests at 1e-300 req/s") as exc:
        gamma_offsets(64, 1e-300, 1.0, np.random.default_rng(0))
    assert exc.value.field == "arrival.rate" and "over the 24 h cap" in str(exc.value)
    # just under the cap is planned
    assert gamma_offsets(10, 10 / MAX_SCHEDULE_S * 1.01, 1.0, np.random.default_rng(0))[-1] > 0


def test_a_trace_gap_of_1e15_ms_names_its_line(tmp_path: Path) -> None:
    path = _trace(tmp_path, 1e15)
    spec = WorkloadSpec(
        source=Source("trace", str(path)), input=None, output=None, arrival=Arrival("trace")
    )
    with pytest.raises(DataError) as exc:
        check(spec)
    assert (exc.value.line, exc.value.field) == (3, "timestamp")
    assert "over the 24 h cap" in str(exc.value)
    # the same trace played fast enough fits
    fast = WorkloadSpec(
        source=Source("trace", str(path)),
        input=None,
        output=None,
        arrival=Arrival("trace", speed=1e12),
    )
    assert check(fast) is not None
    with pytest.raises(ScheduleTooLong):
        trace_offsets([0.0, 1e15])


@pytest.mark.parametrize("bad", [math.nan, math.inf, -1.0, 0.0])
def test_nan_inf_and_negative_rates_are_refused(bad: float) -> None:
    with pytest.raises(TrafficError, match="rate must be"):
        Arrival("open", rate=bad)
    with pytest.raises(TrafficError, match="speed must be"):
        Arrival("trace", speed=bad)


def test_think_time_over_the_cap_is_refused(tok: LocalTokenizer) -> None:
    with pytest.raises(TrafficError, match="think_time_s must be <= 3600"):
        MultiTurn(True, LengthDist(mean=2), think_time_s=1e9)
    spec = WorkloadSpec(
        input=LengthDist(mean=8),
        output=LengthDist(mean=4),
        multi_turn=MultiTurn(True, LengthDist(mean=30), think_time_s=3600.0),
        num_requests=30,
    )
    with pytest.raises(ScheduleTooLong, match="multi_turn.think_time_s"):
        materialize(spec, tok)


def test_the_preview_shows_the_planned_duration(tok: LocalTokenizer) -> None:
    spec = WorkloadSpec(
        input=LengthDist(mean=8),
        output=LengthDist(mean=4),
        arrival=Arrival("open", rate=2.0),
        num_requests=10,
    )
    arrival = preview(materialize(spec, tok))["arrival"]
    assert arrival["planned_s"] == pytest.approx(5.0)  # n / rate, as vLLM normalizes
    assert arrival["cap_s"] == MAX_SCHEDULE_S
