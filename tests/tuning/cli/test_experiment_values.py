"""Issue 41 case 5, end to end on the fake vLLM (which records each start's argv): a value reaches
the engine exactly as it was typed and validated, and its runs and the DB keep it apart from a
close value. (A text value holding a comma: tests/tuning/flags/test_flags_experiment.py.)"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries

FakeCli = Callable[..., CompletedProcess[str]]
WORKLOAD = ["--num-requests", "2", "--concurrency", "1", "--input-len", "8", "--output-len", "2"]
WORKLOAD += ["--num-warmups", "0", "--start-timeout", "240"]


def _starts(record: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def test_close_floats_launch_and_store_as_two_values(
    fake_cli: FakeCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.9000001 and 0.9000002 were both launched as 0.9 and stored under one label."""
    record = tmp_path / "starts.jsonl"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    args = ["--param", "gpu-memory-utilization", "--values", "0.9000001,0.9000002"]
    done = fake_cli(tmp_path, "experiment", "--repeats", "1", *args, *WORKLOAD, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    launched = []
    for start in _starts(record):
        argv = list(start["argv"])  # type: ignore[call-overload]
        launched.append(argv[argv.index("--gpu-memory-utilization") + 1])
    assert sorted(launched) == ["0.9000001", "0.9000002"]
    with connect(tmp_path / "lab.db") as db:
        (exp,) = queries.list_experiments(db)
        runs = queries.list_runs(db, int(exp["id"]))
    assert sorted((r["value"], r["status"]) for r in runs) == [
        ("0.9000001", "done"),
        ("0.9000002", "done"),
    ]
    assert exp["values"] == [0.9000001, 0.9000002]  # the DB gives back the very numbers
    for run in runs:  # what the engine reports it ran with is compared with every digit
        eff = run["effective_config"]
        assert eff["values"]["gpu-memory-utilization"] == run["value"], eff
        assert run["config_mismatch"] == [], run["config_mismatch"]
    assert exp["name"] == "gpu-memory-utilization = 0.9000001, 0.9000002"
