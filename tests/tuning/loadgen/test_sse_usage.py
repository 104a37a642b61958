"""Issue 41, case 3: a server's `usage` is checked once per request, not trusted.

A usage that cannot be true (more output tokens than max_tokens asked, a negative, fractional,
infinite or non-numeric count, more input tokens than the request could hold) fails the request as
`implausible_usage`: its timings kept, neither count stored, the words quoting what was seen.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.records import RequestRecord
from tuning.loadgen.sse import SSEReader


def stream(
    usage: Any, chunks: int = 3, max_tokens: int | None = 3, body: int = 200
) -> RequestRecord:
    """A vLLM-like completion stream of `chunks` content chunks, then `usage`, then [DONE]."""
    rec = RequestRecord(index=0, start=0.0)
    sse = SSEReader(rec, 0.0)
    sse.asked = (max_tokens, body)
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
    sse = SSEReader(rec, 0.0)
    sse.asked = (3, 200)
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
