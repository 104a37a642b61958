"""`bench` against an OpenAI-compatible server without /tokenize (a gateway, not vLLM): prompts
come from the lab's own tokenizer, the output and the result say so, input lengths are marked
approximate; a server that cannot be reached is still an error."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.fakes.fake_openai import fake_server
from tuning.cli.bench import (
    FALLBACK_TOKENIZER_ID,
    add_bench_arguments,
    choose_tokenizer,
    run_bench_command,
)
from tuning.engine.embedded import corpus_tokenizer
from tuning.measure.traffic.workload import LocalTokenizer, WorkloadError


def _bench(base_url: str, out: Path) -> int:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    argv = ["--base-url", base_url, "--model", "fake-model", "--concurrency", "2"]
    argv += ["--num-requests", "6", "--input-len", "24", "--output-len", "4"]
    return run_bench_command(parser.parse_args([*argv, "--out", str(out)]))


def test_bench_without_tokenize_falls_back_and_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    with fake_server(tokenize=False) as srv:
        code = _bench(srv.base_url + "/v1", out)
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "no /tokenize" in printed.err and "approximate" in printed.err
    assert "Input lengths:" in printed.out and "approximate" in printed.out
    result = json.loads(out.read_text())
    assert result["completed"] == 6 and result["tokenizer_id"] == FALLBACK_TOKENIZER_ID
    assert result["lab"]["input_lens_approximate"] is True
    assert "no /tokenize" in result["lab"]["tokenizer_note"]
    # The fake counts one token per byte, the lab's BPE merges bytes: the server saw more.
    assert all(n >= 24 for n in result["input_lens"])


def test_bench_with_tokenize_is_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    with fake_server() as srv:
        assert _bench(srv.base_url, out) == 0
    assert "approximate" not in capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["lab"]["input_lens_approximate"] is False
    assert result["lab"]["tokenizer_note"] is None and result["input_lens"] == [24] * 6


def test_choose_tokenizer_fallback_and_unreachable() -> None:
    with fake_server(tokenize=False) as srv:
        tok, ident = choose_tokenizer(None, "fake-model", srv.base_url, None)
    assert isinstance(tok, LocalTokenizer) and ident == FALLBACK_TOKENIZER_ID
    assert tok.decode(tok.encode("the cache")) == "the cache"
    with pytest.raises(WorkloadError, match="/tokenize failed"):
        choose_tokenizer(None, "fake-model", "http://127.0.0.1:1", None)
    # The same recipe as the embedded engine's tokenizer: deterministic.
    assert corpus_tokenizer().to_str() == corpus_tokenizer().to_str()
