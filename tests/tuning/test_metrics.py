"""Metrics against hand-computed values and against a transcription of vLLM's calculate_metrics."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from core.records import RequestRecord
from tests.factories import record as rec
from tuning.measure.metrics import (
    achieved_concurrency,
    columns,
    goodput,
    steady_state,
    summarize,
    token_times,
    warmup_check,
)


@pytest.fixture
def five() -> list[RequestRecord]:
    """Three successes, two failures; every number below is worked out by hand from these."""
    return [
        rec(0, 0.00, 0.10, [0.02, 0.03, 0.05], out=4, prompt=10),  # e2el 0.20
        rec(1, 0.05, 0.20, [0.10], out=2, prompt=20),  # e2el 0.30
        rec(2, 0.10, 0.05, [], out=1, prompt=5),  # e2el 0.05, no TPOT
        rec(3, 0.20, None, [], out=None, prompt=None, ok=False, kind="http"),
        rec(4, 0.30, 0.01, [0.02], out=None, prompt=None, ok=False, kind="stream_error"),
    ]


def test_summary_hand_computed(five: list[RequestRecord]) -> None:
    s = summarize(five, 1.0)
    assert (s["completed"], s["failed"], s["duration"]) == (3, 2, 1.0)
    assert (s["total_input_tokens"], s["total_output_tokens"]) == (35, 7)
    expected = {
        "request_throughput": 3.0,
        "output_throughput": 7.0,
        "total_token_throughput": 42.0,
        # TTFT [100, 200, 50] ms: p90 at rank 1.8 of [50, 100, 200] -> 100 + 0.8 * 100
        "mean_ttft_ms": 350 / 3,
        "median_ttft_ms": 100,
        "p90_ttft_ms": 180,
        "p99_ttft_ms": 198,
        "std_ttft_ms": np.std([100, 200, 50]),
        # TPOT: (0.2 - 0.1) / 3 and (0.3 - 0.2) / 1; the 1-token request has none
        "mean_tpot_ms": (100 / 3 + 100) / 2,
        "median_tpot_ms": (100 / 3 + 100) / 2,
        "p90_tpot_ms": 100 / 3 + 0.9 * (100 - 100 / 3),
        # ITL pooled over successes only: [20, 30, 50, 100]
        "mean_itl_ms": 50,
        "median_itl_ms": 40,
        "p90_itl_ms": 85,
        "p99_itl_ms": 98.5,
        # E2EL [200, 300, 50]
        "mean_e2el_ms": 550 / 3,
        "median_e2el_ms": 200,
        "p90_e2el_ms": 280,
        "p99_e2el_ms": 298,
    }
    for key, value in expected.items():
        assert s[key] == pytest.approx(value), key
    assert s["failed_by_kind"] == {"http": 1, "stream_error": 1}
    assert s["max_concurrent_requests"] == 3


def test_goodput_hand_computed(five: list[RequestRecord]) -> None:
    g = goodput(five, 1.0, {"ttft": 150, "tpot": 50})
    # #0 ttft 100, tpot 33 -> good; #1 ttft 200 -> bad; #2 ttft 50, tpot 0 (one token) -> good
    assert g == {"good": 2, "good_share": pytest.approx(2 / 5), "request_goodput": pytest.approx(2)}
    assert goodput(five, 2.0, {"e2el": 100})["good"] == 1
    assert goodput(five, 1.0, {"ttft": 100})["good"] == 2  # equal to the SLO is good, like vLLM
    assert goodput(five, 1.0, {"tpot": 1})["good"] == 1  # only the one-token request
    with pytest.raises(ValueError, match="itl"):
        goodput(five, 1.0, {"itl": 5})


def test_achieved_concurrency(five: list[RequestRecord]) -> None:
    assert achieved_concurrency(five, 1.0) == pytest.approx(0.55)
    assert achieved_concurrency(five, 0.0) is None


def test_rows_and_records_agree(five: list[RequestRecord]) -> None:
    assert summarize([r.to_row() for r in five], 1.0) == summarize(five, 1.0)


def test_nothing_succeeded_gives_none_not_zero() -> None:
    failed = [rec(i, i * 0.1, None, [], None, None, ok=False, kind="timeout") for i in range(3)]
    s = summarize(failed, 0.0)
    assert (s["completed"], s["failed"], s["total_output_tokens"]) == (0, 3, 0)
    assert s["output_throughput"] is None and s["mean_ttft_ms"] is None
    assert s["p99_itl_ms"] is None and s["failed_by_kind"] == {"timeout": 3}
    empty = summarize([], 1.0)
    assert empty["completed"] == 0 and empty["request_throughput"] == 0.0


def vllm_reference(records: list[RequestRecord], dur_s: float) -> dict[str, float]:
    """A transcription of vLLM's calculate_metrics loop (benchmarks/serve.py) for our records."""
    total_input = completed = 0
    itls: list[float] = []
    tpots: list[float] = []
    ttfts: list[float] = []
    e2els: list[float] = []
    out_lens: list[int] = []
    for r in records:
        if r.ok:
            output_len = r.output_tokens or 0
            out_lens.append(output_len)
            total_input += r.prompt_tokens or 0
            if output_len > 1:
                assert r.end is not None and r.ttft is not None
                tpots.append((r.end - r.start - r.ttft) / (output_len - 1))
            itls += r.itl
            ttfts.append(r.ttft)  # type: ignore[arg-type]
            e2els.append(r.end - r.start)  # type: ignore[operator]
            completed += 1
        else:
            out_lens.append(0)
    out = {
        "completed": completed,
        "total_input_tokens": total_input,
        "total_output_tokens": sum(out_lens),
        "request_throughput": completed / dur_s,
        "output_throughput": sum(out_lens) / dur_s,
        "total_token_throughput": (total_input + sum(out_lens)) / dur_s,
    }
    for name, values in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        out[f"mean_{name}_ms"] = np.mean(values or 0) * 1000
        out[f"median_{name}_ms"] = np.median(values or 0) * 1000
        out[f"std_{name}_ms"] = np.std(values or 0) * 1000
        for p in (90, 99):
            out[f"p{p}_{name}_ms"] = np.percentile(values or 0, p) * 1000
    return out


def test_matches_vllm_on_random_records() -> None:
    rng = random.Random(7)
    records = []
    for i in range(500):
        n = rng.randint(1, 40)
        ok = rng.random() > 0.1
        records.append(
            rec(
                i,
                rng.random() * 10,
                rng.random() * 0.5,
                [rng.random() * 0.05 for _ in range(n - 1)],
                out=n * rng.choice([1, 2]) if ok else None,
                prompt=rng.randint(1, 100) if ok else None,
                ok=ok,
                kind="http",
            )
        )
    ours = summarize(records, 12.5)
    for key, value in vllm_reference(records, 12.5).items():
        assert ours[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key


def closed_loop(c: int, waves: int, out: int = 10, chunk_s: float = 0.1) -> list[RequestRecord]:
    """C slots, each running `waves` back-to-back requests of `out` one-token chunks."""
    records = []
    for slot in range(c):
        for w in range(waves):
            start = w * out * chunk_s
            records.append(
                rec(slot * waves + w, start, chunk_s, [chunk_s] * (out - 1), out=out, prompt=8)
            )
    return records


def test_steady_state_from_records() -> None:
    records = closed_loop(4, 3)  # 12 requests x 10 tokens, level 4 from 0 to 3 s
    st = steady_state(records, 4)
    assert st["found"] and st["t0"] == pytest.approx(0.0) and st["t1"] == pytest.approx(3.0)
    assert st["output_throughput"] == pytest.approx(120 / 3.0)
    assert st["completed"] == 12


def test_steady_state_drain_cuts_the_window() -> None:
    records = closed_loop(4, 3)
    early = records[2]  # slot 0, third wave: ends at 2.5 s instead of 3.0 (5 chunks, 10 tokens)
    records[2] = rec(early.index, early.start, 0.1, [0.1] * 4, out=10, prompt=8)
    st = steady_state(records, 4)  # need ceil(0.9 * 4) = 4 in flight
    assert st["t1"] == pytest.approx(2.5)
    # tokens in [0, 2.5]: 11 requests of 10 tokens end by 2.5 or are cut there: 2 waves x 4 = 80,
    # the short request's 10, and 3 third-wave requests with chunks at 2.1 .. 2.5 (5 each) = 15
    assert st["output_tokens"] == pytest.approx(105)
    assert st["output_throughput"] == pytest.approx(105 / 2.5)


def test_steady_state_from_timeline_and_not_found() -> None:
    records = closed_loop(4, 3)
    timeline = [(0.1 * k, 4) for k in range(1, 30)] + [(3.0, 0)]
    st = steady_state(records, 4, timeline)
    assert st["t0"] == pytest.approx(0.1) and st["t1"] == pytest.approx(3.0)
    assert st["output_throughput"] == pytest.approx(120 / 2.9)
    assert not steady_state(records, 64)["found"]


def test_token_times_spread_usage_over_chunks() -> None:
    r = rec(0, 1.0, 0.5, [0.1, 0.2], out=6, prompt=1)  # 3 chunks of 2 tokens
    times, weights = token_times(columns([r]))
    assert times.tolist() == pytest.approx([1.5, 1.6, 1.8])
    assert weights.tolist() == pytest.approx([2, 2, 2])


def test_warmup_check() -> None:
    slow = [rec(i, i * 0.01, 0.5 if i < 2 else 0.1, [], out=1, prompt=1) for i in range(10)]
    w = warmup_check(slow, 2)
    assert w["slow_start"] and w["ratio"] == pytest.approx(5.0)
    assert w["first_mean_ttft_ms"] == pytest.approx(500)
    tiny = [rec(i, i * 0.01, 0.003 if i < 2 else 0.001, [], out=1, prompt=1) for i in range(10)]
    assert not warmup_check(tiny, 2)["slow_start"]  # 3x slower but only 2 ms: noise
    assert not warmup_check(slow[:2], 2)["slow_start"]  # nothing to compare against


def test_many_rows_summarize() -> None:
    """100k rows summarize correctly (speed belongs to benchmarks: no wall-clock bound here)."""
    n = 100_000
    records = [
        RequestRecord(
            index=i,
            start=i * 1e-3,
            ttft=0.05,
            end=i * 1e-3 + 0.11,
            itl=[0.004] * 15,
            prompt_tokens=64,
            output_tokens=16,
            ok=True,
        )
        for i in range(n)
    ]
    cols = columns(records)
    s = summarize(cols, 100.0)
    assert steady_state(cols, 100) is not None
    assert s["completed"] == n and math.isclose(s["mean_itl_ms"], 4.0)


def test_chunks_of_several_tokens_give_itl_per_chunk_and_per_token() -> None:
    """Issue 37 item 7: with `--stream-interval 16` a chunk carries 16 tokens, so vLLM's ITL (a
    gap between chunks) grows while the time per token falls; the run also records its tokens a
    chunk and ITL per token, each gap shared by the tokens a later chunk of its request carries."""
    interval = [0.16] * 4  # 64 tokens: 1, then 16, 16, 16, 15 -> 5 chunks, 4 gaps of 160 ms
    recs = [
        rec(0, 0.0, 0.05, interval, out=64, prompt=8),
        rec(1, 0.1, 0.05, [0.16, 0.16, 0.24, 0.08], out=64, prompt=8),
        rec(2, 0.2, 0.05, [0.01, 0.01], out=3, prompt=8),  # one token a chunk: 10 ms a token
        rec(3, 0.3, 0.05, [0.5], out=1, prompt=8),  # chat's role chunk, then its one token
        rec(4, 0.4, 0.05, [0.16], out=None, prompt=None),  # no usage: no tokens, no per-token
        rec(5, 0.5, None, [], out=None, prompt=None, ok=False, kind="http"),
    ]
    assert [r.chunks for r in recs] == [5, 5, 3, 2, 2, 0]
    assert recs[0].tokens_per_chunk == pytest.approx(12.8)
    assert recs[4].tokens_per_chunk is None and recs[5].tokens_per_chunk is None
    s = summarize(recs, 2.0)
    # per chunk: vLLM's ITL, every gap pooled (13 gaps)
    gaps = [*interval, 0.16, 0.16, 0.24, 0.08, 0.01, 0.01, 0.5, 0.16]
    assert s["mean_itl_ms"] == pytest.approx(np.mean(gaps) * 1000)
    # tokens a chunk: output tokens / chunks of the requests with a usage (64 + 64 + 3 + 1) / 15
    assert s["mean_tokens_per_chunk"] == pytest.approx(132 / 15)
    # per token: a gap / ((out - 1) / (chunks - 1)): 63 / 4 for the first two, 1 for the third;
    # the one-token request and the one without usage give none
    per_token = [g * 4 / 63 for g in gaps[:8]] + [0.01, 0.01]
    assert s["mean_itl_per_token_ms"] == pytest.approx(np.mean(per_token) * 1000)
    assert s["median_itl_per_token_ms"] == pytest.approx(np.median(per_token) * 1000)
    assert s["p99_itl_per_token_ms"] == pytest.approx(np.percentile(per_token, 99) * 1000)
    # a request's gaps per token average to its TPOT: the time per token, which fell
    assert np.mean(per_token[:4]) == pytest.approx(0.64 / 63)
    assert s["mean_itl_per_token_ms"] < s["mean_itl_ms"] / 5


def test_one_token_a_chunk_gives_itl_per_token_equal_to_itl(five: list[RequestRecord]) -> None:
    s = summarize(five, 1.0)
    assert s["mean_tokens_per_chunk"] == pytest.approx(7 / 7)
    for stat in ("mean", "median", "std", "p90", "p99"):
        assert s[f"{stat}_itl_per_token_ms"] == pytest.approx(s[f"{stat}_itl_ms"])
    nothing = summarize([rec(0, 0.0, None, [], out=None, prompt=None, ok=False)], 1.0)
    assert nothing["mean_tokens_per_chunk"] is None and nothing["mean_itl_per_token_ms"] is None
