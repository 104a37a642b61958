"""`experiment --resident auto|on|off` (issue 38, item 4) from the command line, on the fake vLLM as
a CUDA engine whose vLLM parser has --enable-sleep-mode: repeats of max-num-seqs switch resident
servers and `--json` carries what was stored (switches, the check with its numbers); the text
output says it in a line; `--resident on` for a flag that sizes memory is refused in one line
before anything is written; a value outside auto|on|off is refused by the parser."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from store import connect
from tests.fakes.gpu_box import FAKE_VLLM_PKG

FakeCli = Callable[..., subprocess.CompletedProcess[str]]
LOAD = ["--num-requests", "8", "--concurrency", "2", "--input-len", "8", "--output-len", "8"]
LOAD += ["--num-warmups", "1", "--start-timeout", "120"]
PACE = "ttft_ms=20,itl_ms=2"


@pytest.fixture
def fake_pkg(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's interpreter imports the fake vllm package: its flags are read from it."""
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(FAKE_VLLM_PKG), path])))


def test_repeats_switch_resident_servers_and_json_carries_the_check(
    tmp_path: Path, fake_cli: FakeCli, fake_pkg: None
) -> None:
    args = ["experiment", "--param", "max-num-seqs", "--values", "2,16", "--repeats", "3"]
    args += ["--set", "kv-cache-memory-bytes=67108864", *LOAD]
    done = fake_cli(tmp_path, *args, "--json", faults=PACE, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = json.loads(done.stdout)
    resident = out["resident"]
    assert resident["asked"] == "auto" and resident["used"] is True
    assert resident["starts"] == 2 and resident["switches"] == 4  # each value: start, 2 switches
    check = resident["check"]
    assert check["values"]["2"]["switched_runs"] == 2
    assert check["values"]["2"]["metrics"]["output_throughput"]["switched"]
    text = fake_cli(tmp_path, *args, faults=PACE, timeout=300)
    assert text.returncode == 0, text.stderr
    assert "resident engines: 4 switches, 2 starts" in text.stdout


def test_resident_on_for_a_memory_flag_is_refused_in_one_line(
    tmp_path: Path, fake_cli: FakeCli
) -> None:
    args = ["experiment", "--param", "max-model-len", "--values", "1024,2048", "--repeats", "2"]
    done = fake_cli(tmp_path, *args, "--resident", "on", *LOAD, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "--resident on: max-model-len sizes the engine's memory" in lines[0]
    db = tmp_path / "lab.db"
    if db.exists():  # nothing written
        with connect(db, readonly=True) as conn:
            assert conn.execute("select count(*) from experiments").fetchone()[0] == 0


def test_an_unknown_resident_mode_is_refused(tmp_path: Path, fake_cli: FakeCli) -> None:
    args = ["experiment", "--param", "max-num-seqs", "--values", "2,16", "--resident", "maybe"]
    done = fake_cli(tmp_path, *args, timeout=60)
    assert done.returncode == 2 and "argument --resident: invalid choice: 'maybe'" in done.stderr
