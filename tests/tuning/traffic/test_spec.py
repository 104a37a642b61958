"""The workload spec: defaults, round trip through plain data, and validation messages."""

from __future__ import annotations

from typing import Any

import pytest

from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.spec import (
    Arrival,
    Bin,
    LengthDist,
    MultiTurn,
    SharedPrefixes,
    Source,
    WorkloadSpec,
)


def full_spec() -> WorkloadSpec:
    return WorkloadSpec(
        input=LengthDist("histogram", bins=(Bin(10, 20, 1.0), Bin(100, 200, 3.0)), maximum=300),
        output=LengthDist("lognormal", 120, std=50),
        prefixes=SharedPrefixes(3, 64, (0.5, 0.25, 0.125)),
        multi_turn=MultiTurn(True, LengthDist("uniform", 3, range_ratio=0.5), 2.5),
        arrival=Arrival("open", rate=12.5, burstiness=0.5, max_concurrency=32),
        num_requests=500,
        seed=7,
        name="chat-like",
    )


def test_defaults_are_a_closed_loop_synthetic_workload() -> None:
    spec = WorkloadSpec()
    assert spec.source.kind == "synthetic" and spec.arrival.kind == "closed"
    assert spec.arrival.concurrency == 1 and spec.version == 1


def test_round_trip_through_plain_data() -> None:
    spec = full_spec()
    data = spec.to_dict()
    assert data["input"]["bins"][1] == {"low": 100, "high": 200, "weight": 3.0}
    assert WorkloadSpec.from_dict(data) == spec
    import json

    assert WorkloadSpec.from_dict(json.loads(json.dumps(data))) == spec


@pytest.mark.parametrize(
    "patch, match",
    [
        ({"arrival": {"kind": "open"}}, "needs a rate"),
        ({"arrival": {"kind": "open", "rate": -1}}, r"arrival: rate must be > 0"),
        ({"arrival": {"kind": "closed", "rate": 3}}, "only for an open-loop"),
        ({"arrival": {"kind": "poisson"}}, "arrival kind 'poisson' is not one of"),
        ({"input": {"kind": "uniform", "mean": 100, "range_ratio": 1.0}}, r"input: range_ratio"),
        ({"input": {"kind": "fixed", "mean": 12.5}}, "input: fixed mean must be an integer"),
        ({"input": {"kind": "histogram"}}, "at least one bin"),
        (
            {"input": {"kind": "histogram", "bins": [{"low": 5, "high": 2, "weight": 1}]}},
            r"input.bins\[0\]: bin high must be >= 5",
        ),
        ({"output": {"kind": "lognormal", "mean": 100}}, "std must be > 0"),
        ({"prefixes": {"count": 2, "length": 8, "shares": [0.7, 0.5]}}, "more than 1"),
        ({"prefixes": {"count": 2, "length": 8, "shares": [1.0]}}, "one share per prefix"),
        ({"prefixes": {"count": 2}}, "prefix length must be >= 1"),
        ({"multi_turn": {"enabled": True}}, "needs a turns distribution"),
        ({"multi_turn": {"think_time_s": 2}}, "need multi_turn.enabled"),
        ({"num_requests": None}, "needs num_requests"),
        ({"num_requests": 0}, "num_requests must be >= 1"),
        ({"seed": -1}, "seed must be >= 0"),
        ({"version": 2}, "spec version 2"),
        ({"arrival": {"rte": 3}}, r"arrival: unknown field\(s\) rte"),
        ({"colour": "blue"}, r"unknown field\(s\) colour"),
        ({"source": {"kind": "sharegpt"}}, "needs a path"),
        ({"source": {"kind": "csv", "path": "x.csv"}}, "input lengths come from the csv file"),
        ({"arrival": {"kind": "trace"}}, "set source kind 'trace'"),
    ],
)
def test_bad_specs_name_the_field(patch: dict[str, Any], match: str) -> None:
    data = WorkloadSpec().to_dict()
    data.update(patch)
    with pytest.raises(TrafficError, match=match):
        WorkloadSpec.from_dict(data)


def test_file_sources_take_lengths_from_the_file() -> None:
    src = Source("sharegpt", "chat.json")
    spec = WorkloadSpec(source=src, input=None, output=None, num_requests=None)
    assert spec.num_requests is None
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(TrafficError, match="turns come from the sharegpt file"):
        WorkloadSpec(
            source=src,
            input=None,
            multi_turn=MultiTurn(True, LengthDist(mean=2)),
        )
    with pytest.raises(TrafficError, match="csv source has no conversations"):
        WorkloadSpec(source=Source("csv", "a.csv"), input=None, multi_turn=MultiTurn(True))
    with pytest.raises(TrafficError, match="hash_ids"):
        WorkloadSpec(
            source=Source("trace", "t.jsonl"),
            input=None,
            output=None,
            prefixes=SharedPrefixes(1, 10),
        )


def test_a_file_spec_that_leaves_input_unset_as_its_error_says_is_accepted(tmp_path: Any) -> None:
    """The refusal says "leave input unset": a spec file without `input` (or with null) is the
    accepted form, for every file kind; a trace's `output` likewise."""
    import json

    from tuning.measure.traffic.errors import DataError
    from tuning.measure.traffic.spec import read_spec

    path = tmp_path / "spec.json"
    for kind in ("sharegpt", "jsonl", "csv"):
        path.write_text(json.dumps({"source": {"kind": kind, "path": "chat.json"}}))
        spec = read_spec(path)
        assert spec.input is None and spec.output == WorkloadSpec().output
    path.write_text(json.dumps({"source": {"kind": "trace", "path": "t.jsonl"}, "input": None}))
    spec = read_spec(path)
    assert (spec.input, spec.output) == (None, None)
    assert WorkloadSpec.from_dict(spec.to_dict()) == spec
    given = {"source": {"kind": "sharegpt", "path": "chat.json"}, "input": {"mean": 8}}
    path.write_text(json.dumps(given))
    with pytest.raises(DataError, match="leave input unset"):
        read_spec(path)
    assert WorkloadSpec.from_dict({}).input == LengthDist(mean=256)  # synthetic: the default
