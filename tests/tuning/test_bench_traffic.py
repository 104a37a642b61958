"""`bench` on real traffic against the fake server: a dataset at a request rate under a cap, and
ShareGPT conversations, with vLLM's keys (request_rate, burstiness) and the lab's traffic block."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.fakes.fake_openai import fake_server
from tuning.cli.bench import add_bench_arguments, run_bench_command


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    return parser.parse_args(argv)


def bench(base_url: str, out: Path, tokenizer: Path, *extra: str) -> dict:  # type: ignore[type-arg]
    args = ["--base-url", base_url, "--model", "fake-model", "--concurrency", "2"]
    args += ["--input-len", "8", "--output-len", "3", "--num-warmups", "1"]
    args += ["--tokenizer", str(tokenizer), "--out", str(out), *extra]
    assert run_bench_command(parse(args)) == 0
    return dict(json.loads(out.read_text()))


def test_bench_a_dataset_open_loop(
    tmp_path: Path, tiny_tokenizer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_server(ttft_ms=2) as srv:
        result = bench(
            srv.base_url,
            tmp_path / "r.json",
            tiny_tokenizer,
            *("--num-requests", "10", "--dataset", "prompts-40.jsonl"),
            *("--request-rate", "50", "--burstiness", "0.5", "--max-concurrency", "3"),
        )
        peak = srv.stats.max_concurrent
    assert peak <= 3 and result["completed"] == 10 and result["failed"] == 0
    assert result["request_rate"] == 50.0 and result["burstiness"] == 0.5
    assert result["max_concurrency"] == 3 and len(result["input_lens"]) == 10
    lab = result["lab"]
    assert lab["workload_spec"]["source"]["kind"] == "jsonl"
    assert lab["traffic"]["target_request_rate"] == 50.0
    assert all(lag is not None for lag in lab["dispatch_lags"])
    printed = capsys.readouterr().out
    assert "Request rate achieved / target:" in printed and "Dispatch lag p99" in printed


def test_bench_sharegpt_conversations(
    tmp_path: Path, tiny_tokenizer: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_server() as srv:
        result = bench(
            srv.base_url,
            tmp_path / "r.json",
            tiny_tokenizer,
            *("--num-requests", "12", "--dataset", "chat-500.sharegpt.json", "--multi-turn"),
        )
    turns = result["lab"]["turns"]
    assert "Mean TTFT, later turns (ms):" in capsys.readouterr().out
    assert result["completed"] == 12 and max(turns) >= 1
    assert result["lab"]["traffic"]["requests_later_turns"] == sum(1 for t in turns if t)
