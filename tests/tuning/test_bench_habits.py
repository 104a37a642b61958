"""`bench` with vLLM's habits (issue 24): a rate, a dataset or a trace defines what the fixed-length
flags would say, so they are not required with them; `--concurrency` with `--request-rate` is an
in-flight cap, as vLLM's `--max-concurrency`. Before, both commands were refused by argparse."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.fakes.fake_openai import fake_server
from tuning.cli.bench import add_bench_arguments, run_bench_command


def run(base_url: str, out: Path, *extra: str) -> int:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    argv = ["--base-url", base_url, "--model", "fake-model", "--out", str(out), *extra]
    return run_bench_command(parser.parse_args(argv))


def test_a_rate_needs_no_concurrency(tmp_path: Path, tiny_tokenizer: Path) -> None:
    out = tmp_path / "r.json"
    with fake_server(ttft_ms=1) as srv:
        code = run(
            srv.base_url,
            out,
            *("--request-rate", "20", "--num-requests", "200", "--input-len", "8"),
            *("--output-len", "2", "--num-warmups", "0", "--tokenizer", str(tiny_tokenizer)),
        )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["completed"] == 200 and result["request_rate"] == 20.0
    assert result["max_concurrency"] is None  # no cap asked for, none invented


def test_concurrency_with_a_rate_caps_what_is_in_flight(
    tmp_path: Path, tiny_tokenizer: Path
) -> None:
    out = tmp_path / "r.json"
    with fake_server(ttft_ms=20) as srv:
        code = run(
            srv.base_url,
            out,
            *("--request-rate", "500", "--concurrency", "2", "--num-requests", "12"),
            *("--num-warmups", "0", "--tokenizer", str(tiny_tokenizer)),
        )
        peak = srv.stats.max_concurrent
    assert code == 0 and peak <= 2
    assert json.loads(out.read_text())["max_concurrency"] == 2


def test_a_trace_needs_no_length_flags(tmp_path: Path, tiny_tokenizer: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 40 * i, "input_length": 10 + i, "output_length": 3} for i in range(6)]
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "r.json"
    with fake_server() as srv:
        code = run(
            srv.base_url,
            out,
            *("--dataset", str(trace), "--dataset-format", "trace", "--num-warmups", "0"),
            *("--tokenizer", str(tiny_tokenizer)),
        )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["completed"] == 6  # every entry of the trace
    assert result["lab"]["workload_spec"]["arrival"]["kind"] == "trace"


def test_the_fixed_length_workload_names_what_it_misses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run("http://127.0.0.1:9", tmp_path / "r.json", "--concurrency", "2") == 1
    err = capsys.readouterr().err
    assert "--num-requests, --input-len, --output-len needed" in err
    assert not (tmp_path / "r.json").exists()
