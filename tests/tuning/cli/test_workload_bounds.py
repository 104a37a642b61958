"""Issue 22, bounded input: each kind of hostile workload file or flag, through `experiment` and
`bench`, is one `refused`/`error` line with exit code 1, no traceback, and no experiment in the DB
(the data file is read and the schedule checked at the flag, before anything is planned)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

Cli = Callable[..., CompletedProcess[str]]
MAX_LINE_BYTES = 4 * 1024 * 1024  # tuning.measure.traffic.bounded's, as a user meets it
DEEP = "[" * 100_000 + "]" * 100_000


def _file(tmp_path: Path, kind: str) -> tuple[list[str], str]:
    """The flags that give a hostile input of this kind, and what its one line must say."""
    if kind == "long-line":
        path = tmp_path / "long.jsonl"
        path.write_text(json.dumps({"prompt": "x" * (MAX_LINE_BYTES + 1)}) + "\n")
        return ["--dataset", str(path)], f"{path}, line 1: a line over the 4 MiB limit"
    if kind == "nested":
        path = tmp_path / "deep.jsonl"
        path.write_text('{"prompt": "ok"}\n{"prompt": ' + DEEP + "}\n")
        return ["--dataset", str(path)], f"{path}, line 2: JSON nested deeper than 64 levels"
    if kind == "nested-spec":
        path = tmp_path / "spec.json"
        path.write_text('{"arrival": ' + DEEP + "}")
        return ["--workload", str(path)], f"{path}: JSON nested deeper than 64 levels"
    if kind == "big-spec":
        path = tmp_path / "big.json"
        path.write_text('{"name": "' + "n" * (2 << 20) + '"}')
        return ["--workload", str(path)], f"{path}: 2048 KiB, over the 1024 KiB limit"
    if kind == "surrogate":
        path = tmp_path / "chat.json"
        turns = [{"from": "human", "value": "q \ud800"}, {"from": "gpt", "value": "a"}]
        path.write_text(json.dumps([{"conversations": turns}]))
        return ["--dataset", str(path)], (
            f"{path}, line 1, field 'conversations[0].value': a lone surrogate \\ud800"
        )
    if kind == "trace-gap":
        path = tmp_path / "gap.jsonl"
        rows = [{"timestamp": t, "input_length": 8, "output_length": 4} for t in (0, 10, 1e15)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return ["--dataset", str(path)], f"{path}, line 3, field 'timestamp': timestamp 1e+15 ms"
    if kind == "tiny-rate":
        return ["--request-rate", "1e-300"], "--request-rate 1e-300: 10 requests at 1e-300 req/s"
    if kind == "nan-rate":
        return ["--request-rate", "nan"], "--request-rate must be a finite number > 0, got nan"
    assert kind == "negative-think"
    return ["--multi-turn", "--think-time", "-1"], "--think-time must be a finite number >= 0"


KINDS = [
    "long-line",
    "nested",
    "nested-spec",
    "big-spec",
    "surrogate",
    "trace-gap",
    "tiny-rate",
    "nan-rate",
    "negative-think",
]
COMMON = ["--num-requests", "10", "--input-len", "8", "--output-len", "4"]


def _one_line(done: CompletedProcess[str], says: str) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert says in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("kind", KINDS)
def test_experiment_refuses_with_one_line_and_plans_nothing(
    kind: str, tmp_path: Path, fake_cli: Callable[..., CompletedProcess[str]]
) -> None:
    """The engine is the fake vLLM: a regression that plans the experiment starts no real one."""
    flags, says = _file(tmp_path, kind)
    home = tmp_path / "home"
    db = home / "lab.db"
    argv = ["experiment", "--repeats", "1", "--param", "concurrency", "--values", "1,2"]
    done = fake_cli(home, *argv, *COMMON, *flags, timeout=120)
    assert _one_line(done, says).startswith("refused: ")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM experiments").fetchone() == (0,)
        assert conn.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)


@pytest.mark.parametrize("kind", ["long-line", "trace-gap", "tiny-rate", "surrogate"])
def test_bench_refuses_before_asking_the_endpoint(
    kind: str, tmp_path: Path, tuning_cli: Cli
) -> None:
    """Port 9 answers nothing: a refusal that reached the endpoint would say so, with exit 1."""
    flags, says = _file(tmp_path, kind)
    result = tmp_path / "result.json"
    argv = ["bench", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--concurrency", "1"]
    done = tuning_cli(
        [*argv, *COMMON, "--out", str(result), *flags], tmp_path / "home", timeout=120
    )
    assert _one_line(done, says).startswith("error: ")
    assert not result.exists()


def test_a_bom_file_previews(
    tuning_cli: Cli, lab_home: Path, tmp_path: Path, tiny_tokenizer: Path
) -> None:
    """What Windows tools write (a UTF-8 BOM before the first line) is read, not refused."""
    path = tmp_path / "excel.jsonl"
    path.write_bytes(
        b'\xef\xbb\xbf{"prompt": "hello there, how are you today?", "output_len": 4}\n'
    )
    done = tuning_cli(["workload", "preview", "--dataset", str(path), "--json"], lab_home)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requests"] == 1


def test_the_preview_shows_the_planned_schedule(
    tuning_cli: Cli, lab_home: Path, tiny_tokenizer: Path
) -> None:
    done = tuning_cli(["workload", "preview", "--dataset", "mooncake-small.jsonl"], lab_home)
    assert done.returncode == 0, done.stderr
    assert "schedule      planned at least 82.3 s (starts and think time; cap 24 h)" in done.stdout
