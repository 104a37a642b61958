"""`python -m tuning workload preview|save|list` and the spec the traffic flags make."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

Cli = Callable[..., CompletedProcess[str]]


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
    assert done.returncode == 1 and f"{bad}, line 2" in done.stderr
