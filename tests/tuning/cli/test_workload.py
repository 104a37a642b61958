"""`python -m tuning workload preview|save|list` and the spec the traffic flags make."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from tuning.cli.experiment import add_workload_arguments
from tuning.cli.workload import add_traffic_arguments, guess_format, spec_from_args
from tuning.traffic import TrafficError

Cli = Callable[..., CompletedProcess[str]]


def flags(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_workload_arguments(p)
    add_traffic_arguments(p)
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


def test_preview_a_dataset(tuning_cli: Cli, lab_home: Path, lab_tokenizer: Path) -> None:
    done = tuning_cli(
        ["workload", "preview", "--dataset", "workloads/chat-500.sharegpt.json", "--multi-turn"],
        lab_home,
    )
    assert done.returncode == 0, done.stderr
    assert "837 in 500 conversations" in done.stdout and "prefix cache" in done.stdout
    js = tuning_cli(
        ["workload", "preview", "--dataset", "mooncake-small.jsonl", "--json"], lab_home
    )
    data = json.loads(js.stdout)
    assert data["source"] == "trace" and data["arrival"]["kind"] == "trace"
    assert data["requests"] == 300 and len(data["fingerprint"]) == 16


def test_preview_refuses_a_bad_file_with_its_line(
    tuning_cli: Cli, lab_home: Path, tmp_path: Path, lab_tokenizer: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "hello there", "output_len": 4}\n{"prompt": \n')
    done = tuning_cli(["workload", "preview", "--dataset", str(bad)], lab_home)
    assert done.returncode == 2 and f"{bad}, line 2" in done.stderr
