"""TrafficOptions: the spec that traffic choices make, the same object from the CLI's flags and
from a page's fields."""

from __future__ import annotations

import argparse

import pytest

from tuning.measure.traffic import TrafficError
from tuning.measure.traffic.options import TrafficOptions, guess_format
from tuning.measure.traffic.workload import add_workload_arguments


def spec_from_args(args: argparse.Namespace) -> object:
    return TrafficOptions.from_cli_args(args).to_spec()


def flags(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_workload_arguments(p)
    TrafficOptions.add_cli_args(p)
    p.add_argument("--param", default="concurrency")
    return p.parse_args(list(argv))


def test_no_traffic_flag_keeps_the_classic_workload() -> None:
    assert spec_from_args(flags()) is None


def test_flags_make_a_spec() -> None:
    spec = spec_from_args(flags("--request-rate", "5", "--burstiness", "0.5", "--multi-turn"))
    assert spec is not None and spec.source.kind == "synthetic"
    assert (spec.arrival.kind, spec.arrival.rate, spec.arrival.burstiness) == ("open", 5.0, 0.5)
    assert spec.multi_turn.enabled and spec.multi_turn.turns is not None
    assert spec.multi_turn.turns.mean == 3
    trace = spec_from_args(flags("--dataset", "mooncake-small.jsonl", "--trace-speed", "4"))
    assert trace is not None and trace.arrival.kind == "trace" and trace.arrival.speed == 4.0
    rate_param = spec_from_args(flags("--param", "request-rate"))
    assert rate_param is not None and rate_param.arrival.kind == "open"
    assert guess_format("x.json") == "sharegpt" and guess_format("x.csv") == "csv"
    with pytest.raises(TrafficError, match="turn multi_turn off"):
        spec_from_args(flags("--dataset", "prompts-40.csv", "--multi-turn"))


def test_a_page_builds_the_same_spec_as_the_flags() -> None:
    """The UI constructs the options directly (no argparse Namespace) and gets the CLI's spec."""
    by_flags = spec_from_args(flags("--request-rate", "5", "--concurrency", "3", "--seed", "7"))
    direct = TrafficOptions(
        request_rate=5.0, concurrency=3, num_requests=64, input_len=64, output_len=64, seed=7
    ).to_spec()
    assert by_flags is not None and direct == by_flags
    assert TrafficOptions().to_spec() is None
