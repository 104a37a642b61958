"""Server-sent events: each event classified as content, usage, done, error or skip; a stream read
one event at a time gives the record it gives read at once."""

from __future__ import annotations

import json
from typing import Any

from core.records import RequestRecord
from tuning.measure.loadgen.sse import SSEReader, classify


def test_classify_events() -> None:
    content = b'data: {"id":"x","choices":[{"index":0,"text":"a"}]}'
    assert classify(content) == ("content", None)
    assert classify(b"data: [DONE]") == ("done", None)
    assert classify(b": ping") == ("skip", None)
    assert classify(b"event: message\ndata: [DONE]") == ("done", None)
    kind, obj = classify(b'data: {"choices":[],"usage":{"completion_tokens":3}}')
    assert kind == "usage" and obj is not None and obj["usage"]["completion_tokens"] == 3
    kind, obj = classify(b'data: {"choices": [{"index": 0, "text": "a"}]}')
    assert kind == "content" and obj is not None
    assert classify(b'data: {"error":{"message":"m"}}')[0] == "error"
    assert classify(b'data: {"object":"error","message":"m"}')[0] == "error"
    assert classify(b"data: {not json")[0] == "error"
    # a token whose text is literally "error" is still content
    assert classify(b'data: {"choices":[{"index":0,"text":"\\"error\\": 1"}]}')[0] == "content"


def _events(n: int, error_after: int | None = None) -> list[bytes]:
    """A chat stream: the role chunk, n token chunks (the second also carrying a running usage,
    as vLLM's `continuous_usage_stats` does), usage, a keep-alive, [DONE]; or an in-band error
    after `error_after` tokens."""
    out = [b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n']
    for i in range(n):
        if error_after is not None and i == error_after:
            return [*out, b'data: {"error":{"message":"boom","code":500}}\n\n']
        chunk: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": f" t{i}"}}]}
        if i == 1:
            chunk["usage"] = {"prompt_tokens": 4, "completion_tokens": 2}
        out.append(b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")
    usage = {"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n}}
    out.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    return [*out, b": keep-alive\n\n", b"data: [DONE]\n\n"]


def _read(events: list[bytes], one_a_read: bool) -> RequestRecord:
    rec = RequestRecord(index=0, start=0.0)
    sse = SSEReader(rec, 0.0, (100, 500))
    reads = events if one_a_read else [b"".join(events)]
    for i, data in enumerate(reads):
        if not sse.feed(data, 1.0 + i):
            break
    else:
        sse.finish()
    sse.close(0.0, None)
    return rec


def test_one_event_a_read_gives_the_record_the_whole_stream_gives() -> None:
    """Each token's event alone in its read (a server that keeps up with its client) is read
    the way a run of events is: one gap each, a chunk that carries a usage, the final usage,
    a keep-alive and an in-band error handled as in any other read."""
    alone, whole = _read(_events(4), True), _read(_events(4), False)
    assert alone.ok and whole.ok and alone.output_tokens == whole.output_tokens == 4
    assert len(alone.itl) == len(whole.itl) == 4 and alone.chunks == 5
    assert alone.itl == [1.0] * 4  # each read stamped at its own time
    broken = _read(_events(4, error_after=2), True)
    assert not broken.ok and broken.error_kind == "stream_error" and len(broken.itl) == 2
    assert broken.error is not None and "boom" in broken.error
