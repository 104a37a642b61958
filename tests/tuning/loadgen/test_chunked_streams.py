"""Issue 37 item 7: a stream whose chunks carry several tokens (vLLM's `--stream-interval 16`,
speculative decoding) is recorded as it came: each request's chunks and tokens a chunk, and the
run's ITL per chunk (vLLM's) beside ITL per token, on both transports and both endpoints."""

from __future__ import annotations

import pytest

from tests.factories import load_workload as wl
from tests.factories import prompts_for
from tests.fakes.fake_openai import fake_server
from tuning.measure.loadgen.start import run_load_sync
from tuning.measure.metrics import summarize

MODEL = "fake-model"


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_sixteen_tokens_a_chunk_are_recorded_with_itl_per_chunk_and_per_token(
    transport: str, endpoint: str
) -> None:
    w = wl(n=6, c=3, out=64, endpoint=endpoint)
    with fake_server(stream_interval=16, itl_ms=2) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    role = 1 if endpoint == "chat" else 0  # vLLM's chat stream opens with the role alone
    for r in res.records:
        assert r.ok and r.output_tokens == 64, r.error
        assert r.chunks == 5 + role  # 1 token, then 16, 16, 16 and the last 15
        assert r.tokens_per_chunk == pytest.approx(64 / (5 + role))
    s = summarize(res.records, res.duration_s)
    assert s["mean_tokens_per_chunk"] == pytest.approx(64 / (5 + role))
    # a gap between chunks spans about 16 tokens: per token it is (64 - 1) / (chunks - 1) less,
    # and a request's gaps per token average to its TPOT
    assert s["mean_itl_per_token_ms"] == pytest.approx(s["mean_itl_ms"] * (4 + role) / 63)
    assert s["mean_itl_per_token_ms"] == pytest.approx(s["mean_tpot_ms"])
    assert s["mean_itl_ms"] > 10 * s["mean_itl_per_token_ms"]


def test_one_token_a_chunk_reads_the_same_per_chunk_and_per_token(transport: str) -> None:
    w = wl(n=4, c=2, out=8)
    with fake_server(itl_ms=1) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert all(r.ok and r.tokens_per_chunk == 1.0 for r in res.records)
    s = summarize(res.records, res.duration_s)
    assert s["mean_tokens_per_chunk"] == 1.0
    assert s["p99_itl_per_token_ms"] == s["p99_itl_ms"]
