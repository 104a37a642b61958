"""`bench` end to end against the fake server: vLLM's result keys, the lab block, exit codes,
no key."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.factories import bench_args
from tests.fakes.fake_openai import fake_server
from tuning.cli.bench import add_bench_arguments, choose_tokenizer, parse_goodput, run_bench_command
from tuning.measure.traffic.workload import LocalTokenizer, ServerTokenizer

KEY = "sk-bench-secret-42"
VLLM_KEYS = [
    "duration",
    "completed",
    "failed",
    "total_input_tokens",
    "total_output_tokens",
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    *[
        f"{s}_{m}_ms"
        for m in ("ttft", "tpot", "itl", "e2el")
        for s in ("mean", "median", "std", "p90", "p99")
    ],
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "errors",
    "max_concurrency",
    "num_prompts",
    "request_goodput",
]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    return parser.parse_args(argv)


def test_there_is_no_api_key_flag(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        bench_args("http://x", tmp_path / "r.json", "--api-key", "k")
    with pytest.raises(SystemExit):
        parse(["--base-url", "http://x"])


def test_goodput_parsing() -> None:
    assert parse_goodput(["ttft:200", "tpot:5.5"]) == {"ttft": 200.0, "tpot": 5.5}
    assert parse_goodput(None) == {}
    for bad in (["itl:3"], ["ttft"], ["ttft:x"], ["e2el:0"]):
        with pytest.raises(ValueError):
            parse_goodput(bad)


def test_bench_end_to_end_with_server_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = tmp_path / "res" / "r.json"
    with fake_server(api_key=KEY, ttft_ms=5) as srv:
        code = run_bench_command(bench_args(srv.base_url + "/v1", out, "--goodput", "ttft:1000"))
    printed = capsys.readouterr()
    assert code == 0, printed.err
    text = out.read_text()
    result = json.loads(text)
    for key in VLLM_KEYS:
        assert key in result, key
    assert result["completed"] == 9 and result["failed"] == 0
    assert result["total_output_tokens"] == 45
    # the fake tokenizes one token per byte, so exact prompts mean exactly 12 usage tokens
    assert result["input_lens"] == [12] * 9 and result["tokenizer_id"] == "server:/tokenize"
    assert result["request_goodput"] == pytest.approx(9 / result["duration"])
    lab = result["lab"]
    assert lab["workload"]["concurrency"] == 3 and len(lab["workload_fingerprint"]) == 16
    assert lab["client"]["concurrency"] == 3 and lab["achieved_concurrency"] > 0
    assert lab["failed_by_kind"] == {} and lab["goodput"]["good"] == 9
    assert "Serving Benchmark Result" in printed.out and "Mean TTFT (ms)" in printed.out
    assert KEY not in text + printed.out + printed.err


def test_bench_with_local_tokenizer_and_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], tiny_tokenizer: Path
) -> None:
    out = tmp_path / "r.json"
    with fake_server(fail_http_on={4, 5}, no_choices_on={6}) as srv:
        extra = ["--tokenizer", str(tiny_tokenizer), "--num-warmups", "1", "--endpoint", "chat"]
        code = run_bench_command(bench_args(srv.base_url, out, *extra, "--transport", "raw"))
    printed = capsys.readouterr()
    assert code == 0
    result = json.loads(out.read_text())
    assert (result["completed"], result["failed"]) == (6, 3)
    assert result["lab"]["failed_by_kind"] == {"http": 2, "early_end": 1}
    assert result["backend"] == "openai-chat" and "Failures by kind" in printed.out
    assert result["lab"]["transport"] == "raw"


def test_bench_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert run_bench_command(bench_args("http://127.0.0.1:9", out, "--concurrency", "0")) == 1
    with fake_server() as srv:
        assert run_bench_command(bench_args(srv.base_url, out, model="nope")) == 1
        assert "check the model name" in capsys.readouterr().err
    with fake_server(no_usage=True) as srv:
        assert run_bench_command(bench_args(srv.base_url, out, "--quiet")) == 1
    assert "no request succeeded" in capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["failed"] == 9 and result["mean_ttft_ms"] is None


def test_choose_tokenizer(tmp_path: Path, tiny_tokenizer: Path) -> None:
    with fake_server() as srv:
        tok, ident = choose_tokenizer(None, "fake-model", srv.base_url, None)
    assert isinstance(tok, ServerTokenizer) and ident == "server:/tokenize"
    tok, ident = choose_tokenizer(None, str(tiny_tokenizer.parent), "http://127.0.0.1:1", None)
    assert isinstance(tok, LocalTokenizer) and ident.endswith("tokenizer.json")


def test_bench_reports_tokens_a_chunk_and_itl_per_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37 item 7: 5 tokens streamed as 1 + 4 (`--stream-interval 4`) read 2.5 tokens a
    chunk, and ITL per token (a gap shared by the 4 tokens of the later chunk) beside ITL."""
    out = tmp_path / "r.json"
    with fake_server(stream_interval=4, itl_ms=8) as srv:
        code = run_bench_command(bench_args(srv.base_url, out))
    printed = capsys.readouterr()
    assert code == 0, printed.err
    result = json.loads(out.read_text())
    assert result["mean_tokens_per_chunk"] == 2.5
    assert result["mean_itl_per_token_ms"] == pytest.approx(result["mean_itl_ms"] / 4)
    assert "Tokens per chunk (mean):                 2.50" in printed.out
    assert "ITL per token, mean / P99 (ms):" in printed.out
