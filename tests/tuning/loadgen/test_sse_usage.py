"""Issue 41, case 3: a server's `usage` is checked once per request, not trusted.

A usage that cannot be true (more output tokens than max_tokens asked, a negative, fractional,
infinite or non-numeric count, more input tokens than the request could hold) fails the request as
`implausible_usage`: its timings kept, neither count stored, the words quoting what was seen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from core.records import RequestRecord
from tests.factories import load_workload as wl
from tests.factories import prompts_for
from tests.fakes.fake_openai import fake_server
from tuning.measure.loadgen.schedule import plan_workload, run_schedule_sync
from tuning.measure.loadgen.sse import SSEReader
from tuning.measure.loadgen.start import run_load_sync
from tuning.measure.traffic import LengthDist, WorkloadSpec, materialize
from tuning.measure.traffic.workload import LocalTokenizer

MODEL = "fake-model"


def stream(
    usage: Any, chunks: int = 3, max_tokens: int | None = 3, body: int = 200
) -> RequestRecord:
    """A vLLM-like completion stream of `chunks` content chunks, then `usage`, then [DONE]."""
    rec = RequestRecord(index=0, start=0.0)
    sse = SSEReader(rec, 0.0, (max_tokens, body))
    events = [
        b'data: {"id":"c","choices":[{"index":0,"text":" tok","finish_reason":null}]}'
        for _ in range(chunks)
    ]
    events.append(b"data: " + json.dumps({"choices": [], "usage": usage}).encode())
    events.append(b"data: [DONE]")
    for k, event in enumerate(events):
        assert sse.feed(event + b"\n\n", 0.01 * (k + 1))
    sse.finish()
    sse.close(0.0, None)
    return rec


def test_a_forged_usage_after_three_chunks_fails_the_request_in_words() -> None:
    rec = stream({"completion_tokens": 1e9, "prompt_tokens": -5})
    assert not rec.ok and rec.error_kind == "implausible_usage"
    assert rec.output_tokens is None and rec.prompt_tokens is None  # nothing of it stored
    assert rec.ttft is not None and rec.end is not None  # its timings kept
    assert rec.error is not None
    assert "server's usage says 1,000,000,000 output tokens for a stream of 3 chunks" in rec.error
    assert "3 were asked for (max_tokens)" in rec.error
    assert "-5 input tokens" in rec.error


@pytest.mark.parametrize(
    ("usage", "words"),
    [
        ({"completion_tokens": -1, "prompt_tokens": 4}, "-1 output tokens"),
        ({"completion_tokens": 2.5, "prompt_tokens": 4}, "2.5 output tokens"),
        ({"completion_tokens": "3", "prompt_tokens": 4}, "'3' output tokens"),
        ({"completion_tokens": 3, "prompt_tokens": 10**6}, "1,000,000 input tokens"),
        ("lots", "not an object"),
    ],
)
def test_counts_that_cannot_be_true_are_refused(usage: Any, words: str) -> None:
    rec = stream(usage)
    assert not rec.ok and rec.error_kind == "implausible_usage", rec
    assert rec.error is not None and words in rec.error, rec.error


@pytest.mark.parametrize("raw", [b"Infinity", b"NaN", b"1e400", b"1" + b"0" * 400])
def test_infinite_and_huge_counts_never_crash_the_reader(raw: bytes) -> None:
    """JSON lets a server send Infinity, NaN or a 400-digit count; int(inf) used to raise."""
    rec = RequestRecord(index=0, start=0.0)
    sse = SSEReader(rec, 0.0, (3, 200))
    sse.feed(b'data: {"choices":[{"index":0,"text":"a"}]}\n\n', 0.01)
    sse.feed(b'data: {"choices":[],"usage":{"completion_tokens":' + raw + b"}}\n\n", 0.02)
    sse.feed(b"data: [DONE]\n\n", 0.03)
    sse.finish()
    sse.close(0.0, None)
    assert not rec.ok and rec.error_kind == "implausible_usage" and rec.output_tokens is None


def test_a_true_usage_is_kept_and_many_tokens_in_few_chunks_are_true() -> None:
    """vLLM merges the deltas of several steps into one chunk when its API server falls behind
    (and `--stream-interval` does on purpose): 3 chunks may carry all 64 tokens asked for."""
    rec = stream({"completion_tokens": 64, "prompt_tokens": 100}, chunks=3, max_tokens=64)
    assert rec.ok and rec.output_tokens == 64 and rec.prompt_tokens == 100
    # a whole float is a count as JSON may carry it; a missing prompt_tokens stays unknown
    rec = stream({"completion_tokens": 3.0}, max_tokens=3)
    assert rec.ok and rec.output_tokens == 3 and rec.prompt_tokens is None


def test_both_transports_check_the_usage_against_the_requests_own_max_tokens(
    transport: str,
) -> None:
    """The closed loop asks the workload's output length: a server saying one more is refused."""
    w = wl(n=3, c=3, out=3)
    with fake_server(usage_override={"completion_tokens": 4}) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert [r.error_kind for r in res.records] == ["implausible_usage"] * 3
    assert all("3 were asked for" in str(r.error) for r in res.records)


def test_a_plan_checks_each_request_against_its_own_max_tokens(tiny_tokenizer: Path) -> None:
    """Planned traffic asks each request's own output length (here 2 to 6): a server that says
    4 tokens lies only to the requests that asked for fewer."""
    spec = WorkloadSpec(
        input=LengthDist("fixed", 8),
        output=LengthDist("uniform", 4, range_ratio=0.5),
        num_requests=12,
        seed=3,
    )
    plan = materialize(spec, LocalTokenizer(tiny_tokenizer))
    asked = [r.output_len for r in plan.requests]
    assert min(asked) < 4 <= max(asked)
    with fake_server(usage_override={"completion_tokens": 4}) as srv:
        res = run_schedule_sync(
            srv.base_url, MODEL, plan, [], plan_workload(plan, 0, "completions")
        )
    for r, n in zip(res.records, asked, strict=True):
        assert r.ok == (n >= 4) and (r.error_kind == "implausible_usage") == (n < 4), (n, r)
