"""Issue 37 item 7 end to end on the fake vLLM (which streams `--stream-interval N` tokens a chunk
as vLLM does, its chunks paced half per chunk, half per token): an experiment of stream-interval 1
vs 16 records each run's tokens a chunk, and `compare` says the chunk size differs next to ITL,
whose gap between chunks grew, while it judges the time per token (TPOT, ITL per token) better."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import connect, queries
from tuning.cli.main import main

FakeCli = Callable[..., CompletedProcess[str]]
WORKLOAD = ["--num-requests", "8", "--concurrency", "2", "--input-len", "8", "--output-len", "64"]
WORKLOAD += ["--num-warmups", "0", "--start-timeout", "240", "--repeats", "3"]


def test_stream_interval_16_differs_in_chunk_size_and_is_better_per_token(
    fake_cli: FakeCli,
    fake_vllm_python: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    args = ["--param", "stream-interval", "--values", "1,16", *WORKLOAD, "--json"]
    done = fake_cli(tmp_path, "experiment", *args, faults="itl_ms=5")
    assert done.returncode == 0, done.stdout + done.stderr
    with connect(tmp_path / "lab.db") as db:
        runs = queries.list_runs(db)
    assert sorted(r["value"] for r in runs) == ["1"] * 3 + ["16"] * 3
    for run in runs:
        assert run["status"] == "done"
        # 64 tokens: one chunk each at 1; at 16 the first token alone, then 16, 16, 16, 15
        chunks = 64 / 64 if run["value"] == "1" else 64 / 5
        assert abs(run["mean_tokens_per_chunk"] - chunks) < 1e-9, run["mean_tokens_per_chunk"]
        assert run["summary"]["mean_tokens_per_chunk"] == run["mean_tokens_per_chunk"]
        assert run["mean_itl_per_token_ms"] is not None and run["p99_itl_per_token_ms"] is not None
    # compare reads only the store: in-process (the CLI's start-up is not what this test is about)
    db = str(tmp_path / "lab.db")
    monkeypatch.setenv("TUNING_LAB_HOME", str(tmp_path))  # the lab fake_cli ran in
    assert main(["compare", "--db", db, "--experiment", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    [itl] = [x for x in lines if x.strip().startswith("mean ITL  ")]
    assert "worse" in itl and "chunk size differs (1 → 12.8 tokens a chunk)" in itl, itl
    [tpot] = [x for x in lines if x.strip().startswith("mean TPOT  ")]
    [per_token] = [x for x in lines if x.strip().startswith("mean ITL per token  ")]
    for line in (tpot, per_token):
        assert " better (" in line and "chunk size" not in line, line
    assert main(["compare", "--db", db, "--experiment", "1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    verdicts = {r["metric"]: r["verdict"] for r in data["rows"] if r["role"] == "candidate"}
    assert verdicts["mean_tpot_ms"] == verdicts["mean_itl_per_token_ms"] == "better"
    assert data["chunks"]["note"].startswith("chunk size differs (1 → 12.8 tokens a chunk)")
    assert sorted(data["chunks"]["tokens_per_chunk"].values()) == pytest.approx([1.0, 12.8])
