"""Server-sent events: each event classified as content, usage, done, error or skip."""

from __future__ import annotations

from tuning.measure.loadgen.sse import classify


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
