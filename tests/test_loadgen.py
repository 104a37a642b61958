"""The closed-loop client against the fake server: timings, failures, warm-ups, C in flight, the key."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from core.records import RequestRecord
from core.redact import display_url
from tests.fakes.fake_openai import fake_server
from tuning.loadgen.child import run_load_in_subprocess
from tuning.loadgen.client import LoadError, _Client, run_load_sync
from tuning.loadgen.endpoint import EndpointError, check_endpoint
from tuning.loadgen.http1 import Body, Target
from tuning.loadgen.sse import classify
from tuning.metrics import achieved_concurrency, summarize
from tuning.workload import Workload

MODEL = "fake-model"
TRANSPORTS = ["aiohttp", "raw"]
KEY = "sk-test-0123456789abcdef"


def wl(n: int = 12, c: int = 4, out: int = 6, warm: int = 0, **kw: object) -> Workload:
    return Workload(
        num_requests=n, concurrency=c, input_len=4, output_len=out, num_warmups=warm, **kw
    )  # type: ignore[arg-type]


def prompts_for(w: Workload, special: dict[int, str] | None = None) -> list[str]:
    """Warm-ups are 'warm-i', measured prompts 'req-i'; `special` puts fake markers in measured ones."""
    out = [f"warm-{i}" for i in range(w.warmups)] + [f"req-{i}" for i in range(w.num_requests)]
    for i, text in (special or {}).items():
        out[w.warmups + i] = text
    return out


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Both transports must pass every streaming test: they share the SSE reader, not the HTTP."""
    return str(request.param)


def test_happy_path_timings_and_usage(transport: str) -> None:
    w = wl(n=6, c=2, out=5)
    with fake_server(ttft_ms=25, itl_ms=6) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
        bodies = srv.stats.bodies
    assert [r.index for r in res.records] == list(range(6))
    for r in res.records:
        assert r.ok and r.error_kind is None and r.http_status == 200
        assert r.output_tokens == 5 and r.prompt_tokens == len("req-0")
        assert r.ttft is not None and 0.02 <= r.ttft < 1.0
        assert len(r.itl) == 4 and all(0.003 <= g < 1.0 for g in r.itl)
        assert r.end is not None and r.end == pytest.approx(r.start + r.ttft + sum(r.itl))
    assert 0 < res.duration_s < 5 and res.records[0].start >= 0
    assert res.client_cpu_s >= 0 and res.loop_lag_max_ms >= res.loop_lag_p99_ms >= 0
    body = bodies[0]
    assert body["stream"] is True and body["ignore_eos"] is True and body["max_tokens"] == 5
    assert body["temperature"] == 0 and body["stream_options"] == {"include_usage": True}
    assert body["model"] == MODEL and body["prompt"] == "req-0"


def test_tokens_come_from_usage_not_chunks(transport: str) -> None:
    w = wl(n=3, c=3, out=7)
    with fake_server(tokens_per_chunk=3) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    for r in res.records:
        assert r.ok and r.output_tokens == 7 and len(r.itl) == 2  # 3 chunks: 3 + 3 + 1 tokens
    assert summarize(res.records, res.duration_s)["total_output_tokens"] == 21


def test_closed_loop_keeps_exactly_c_in_flight(transport: str) -> None:
    w = wl(n=30, c=5, out=10)
    with fake_server(ttft_ms=5, itl_ms=3) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
        assert srv.stats.max_concurrent == 5  # the server never saw more than C
    assert all(r.ok for r in res.records)
    # the client's own count: C from the first dispatch until the last one (then it drains)
    last_dispatch = max(r.start for r in res.records)
    mid = [n for t, n in res.inflight if 0.05 < t < last_dispatch]
    assert mid and set(mid) == {5}
    assert res.inflight[-1][1] == 0
    # and the slots were busy: a free slot is refilled at once, so sum(E2EL) / duration ~ C
    assert achieved_concurrency(res.records, res.duration_s) > 0.7 * 5


def test_warmups_go_first_and_are_not_counted(transport: str) -> None:
    w = wl(n=6, c=3, warm=3)
    phases: list[str] = []
    with fake_server() as srv:
        res = run_load_sync(
            srv.base_url, MODEL, prompts_for(w), w, on_phase=phases.append, transport=transport
        )
        sent = [b["prompt"] for b in srv.stats.bodies]
    assert srv.stats.requests == 9 and len(res.records) == 6
    assert set(sent[:3]) == {"warm-0", "warm-1", "warm-2"}
    assert set(sent[3:]) == {f"req-{i}" for i in range(6)}
    assert phases == ["warming_up", "loading"] and res.warmup_failed == 0


def test_failed_warmups_are_reported_not_counted(transport: str) -> None:
    w = wl(n=4, c=2, warm=2)
    with fake_server(fail_http_on={0}) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert res.warmup_failed == 1 and res.warmup_errors[0].startswith("http")
    assert len(res.records) == 4 and all(r.ok for r in res.records)


def test_every_failure_is_a_record(transport: str) -> None:
    special = {
        1: "[[http500]]",
        2: "[[error_after=3]]",
        3: "[[hang]]",
        4: "[[early_end=2]]",
        5: "[[no_usage]]",
        6: "[[no_choices]]",
    }
    w = wl(n=10, c=4, out=6, request_timeout_s=0.4)
    with fake_server(itl_ms=1) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w, special), w, transport=transport)
    by = {r.index: r for r in res.records}
    assert len(by) == 10
    assert [i for i in by if by[i].ok] == [0, 7, 8, 9]
    assert by[1].error_kind == "http" and by[1].http_status == 500
    assert "injected failure" in (by[1].error or "")
    assert by[2].error_kind == "stream_error" and "injected stream error" in (by[2].error or "")
    assert len(by[2].itl) == 2 and by[2].ttft is not None  # the partial stream stays on record
    assert by[3].error_kind == "timeout" and by[3].ttft is None
    assert by[4].error_kind == "early_end" and "[DONE]" in (by[4].error or "")
    assert by[5].error_kind == "no_usage" and by[5].output_tokens is None
    assert by[5].ttft is not None and len(by[5].itl) == 5  # timings kept for later recompute
    assert by[6].error_kind == "early_end" and "choices" in (by[6].error or "")
    s = summarize(res.records, res.duration_s)
    assert (s["completed"], s["failed"]) == (4, 6)
    assert s["failed_by_kind"] == {
        "http": 1,
        "stream_error": 1,
        "timeout": 1,
        "early_end": 2,
        "no_usage": 1,
    }
    assert s["total_output_tokens"] == 24


def test_error_object_style_inside_the_stream(transport: str) -> None:
    w = wl(n=2, c=2)
    with fake_server(error_after={0: 0, 1: 2}, error_style="object") as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert {r.error_kind for r in res.records} == {"stream_error"}


@pytest.mark.parametrize(
    "variant",
    [{"spaced_json": True}, {"crlf": True}, {"split_writes": True}, {"tokens_per_chunk": 4}],
)
def test_unusual_but_valid_streams(variant: dict[str, object], transport: str) -> None:
    w = wl(n=6, c=3, out=8)
    with fake_server(**variant) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    tpc = int(variant.get("tokens_per_chunk", 1))  # type: ignore[call-overload]
    for r in res.records:
        assert r.ok, r.error
        assert r.output_tokens == 8 and len(r.itl) == -(-8 // tpc) - 1


def test_chat_endpoint_counts_the_role_chunk_like_vllm(transport: str) -> None:
    w = wl(n=4, c=2, out=5, endpoint="chat")
    with fake_server() as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
        assert set(srv.stats.paths) == {"/v1/chat/completions"}
        assert srv.stats.bodies[0]["messages"][0]["role"] == "user"
    for r in res.records:
        assert r.ok and r.output_tokens == 5 and len(r.itl) == 5  # role chunk + 5 content chunks


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(suffix: str, transport: str) -> None:
    w = wl(n=2, c=1)
    with fake_server() as srv:
        assert check_endpoint(srv.base_url + suffix, MODEL) == [MODEL]
        res = run_load_sync(srv.base_url + suffix, MODEL, prompts_for(w), w, transport=transport)
        assert set(srv.stats.paths) == {"/v1/completions"}
    assert all(r.ok for r in res.records)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_check_endpoint_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with fake_server(api_key=KEY) as srv:
        with pytest.raises(EndpointError, match="no API key was sent; check OPENAI_API_KEY"):
            check_endpoint(srv.base_url, MODEL)
        with pytest.raises(EndpointError, match="refused; check OPENAI_API_KEY") as wrong:
            check_endpoint(srv.base_url, MODEL, "sk-wrong-key")
        assert "sk-wrong-key" not in str(wrong.value)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        assert check_endpoint(srv.base_url, MODEL) == [MODEL]
        with pytest.raises(EndpointError, match=r"check the model name \(served: fake-model\)"):
            check_endpoint(srv.base_url, "llama-9000")
        with pytest.raises(EndpointError, match="404.*check the base URL"):
            check_endpoint(srv.base_url + "/somewhere", MODEL)
    with pytest.raises(EndpointError, match="connection refused.*check the base URL"):
        check_endpoint(f"http://127.0.0.1:{free_port()}", MODEL)
    with pytest.raises(EndpointError, match="check the base URL"):
        check_endpoint("localhost:8000", MODEL)


def test_key_is_sent_and_never_stored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], transport: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    w = wl(n=4, c=2)
    with fake_server(api_key=KEY, echo_auth_in_errors=True) as srv:
        res = run_load_sync(
            srv.base_url, MODEL, prompts_for(w, {0: "[[http500]]"}), w, transport=transport
        )
        assert set(srv.stats.authorization) == {f"Bearer {KEY}"}
    assert [r.ok for r in res.records] == [False, True, True, True]
    assert "***" in (res.records[0].error or "")  # the careless server echoed it; we scrubbed it
    stored = json.dumps([r.to_row() for r in res.records]) + json.dumps(res.health())
    stored += repr(res) + repr(res.records)
    out = capsys.readouterr()
    assert KEY not in stored + out.out + out.err


def test_wrong_key_fails_requests_as_http_401(
    monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-nope")
    w = wl(n=2, c=1)
    with fake_server(api_key=KEY) as srv:
        res = run_load_sync(srv.base_url, MODEL, prompts_for(w), w, transport=transport)
    assert {(r.error_kind, r.http_status) for r in res.records} == {("http", 401)}


def test_unknown_model_is_an_http_failure(transport: str) -> None:
    w = wl(n=2, c=2)
    with fake_server() as srv:
        res = run_load_sync(srv.base_url, "other", prompts_for(w), w, transport=transport)
    assert {r.http_status for r in res.records} == {404}
    assert "does not exist" in (res.records[0].error or "")


def test_connection_refused_is_an_exception_record(transport: str) -> None:
    w = wl(n=3, c=2)
    res = run_load_sync(
        f"http://127.0.0.1:{free_port()}", MODEL, prompts_for(w), w, transport=transport
    )
    assert len(res.records) == 3 and {r.error_kind for r in res.records} == {"exception"}


def test_progress_and_prompt_count() -> None:
    w = wl(n=5, c=2)
    seen: list[tuple[int, int]] = []
    with fake_server() as srv:
        run_load_sync(
            srv.base_url, MODEL, prompts_for(w), w, on_progress=lambda d, t: seen.append((d, t))
        )
        with pytest.raises(LoadError, match="needs 5"):
            run_load_sync(srv.base_url, MODEL, ["x"] * 4, w)
    assert seen[-1] == (5, 5)


def test_cancel_stops_dispatch_and_in_flight_requests(transport: str) -> None:
    w = wl(n=100, c=4, out=50)
    cancel = threading.Event()

    def arm(phase: str) -> None:  # stop 0.15 s into the measured phase, however slow the start
        if phase == "loading":
            threading.Timer(0.15, cancel.set).start()

    with fake_server(itl_ms=20) as srv:
        t = time.monotonic()
        res = run_load_sync(
            srv.base_url, MODEL, prompts_for(w), w, cancel=cancel, on_phase=arm, transport=transport
        )
        elapsed = time.monotonic() - t
    assert res.cancelled and elapsed < 5
    assert 4 <= len(res.records) < 100
    stopped = [r for r in res.records if not r.ok]
    assert stopped and all(
        r.error_kind == "exception" and "cancelled" in (r.error or "") for r in stopped
    )


def test_in_a_subprocess() -> None:
    transport = "raw"
    w = wl(n=10, c=3, warm=2)
    seen: list[tuple[int, int]] = []
    phases: list[str] = []
    with fake_server(ttft_ms=5) as srv:
        res = run_load_in_subprocess(
            srv.base_url,
            MODEL,
            prompts_for(w),
            w,
            api_key=KEY,
            on_progress=lambda d, t: seen.append((d, t)),
            on_phase=phases.append,
            transport=transport,
        )
        assert set(srv.stats.authorization) == {f"Bearer {KEY}"}
    assert len(res.records) == 10 and all(r.ok for r in res.records)
    assert seen[-1] == (10, 10) and phases == ["warming_up", "loading"]


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


def test_display_url_drops_credentials() -> None:
    assert display_url("http://user:pw@h:1/v1") == "http://h:1/v1"
    assert display_url("http://h:1") == "http://h:1"


def test_unknown_transport_is_refused() -> None:
    with pytest.raises(LoadError, match="transport"):
        run_load_sync("http://127.0.0.1:1", MODEL, ["a"], wl(n=1, c=1), transport="carrier-pigeon")


def chunked(*parts: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n" + trailer + b"\r\n"


def test_chunked_body_any_split() -> None:
    raw = chunked(b"data: a\n\n", b"data: bb\n\n" * 3, b"x" * 300, trailer=b"X-T: 1\r\n") + b"NEXT"
    want = b"data: a\n\n" + b"data: bb\n\n" * 3 + b"x" * 300
    for step in (1, 2, 3, 7, 64, len(raw)):
        body = Body("chunked", 0, True)
        got = b"".join(
            body.feed(raw[i : i + step]) for i in range(0, len(raw), step) if not body.complete
        )
        assert got == want and body.complete, step
    body = Body("chunked", 0, True)
    assert body.feed(raw) == want and body.leftover == b"NEXT"
    assert Body("chunked", 0, True).feed(b"3;ext=1\r\nabc\r\n0\r\n\r\n") == b"abc"
    for bad in (b"zz\r\nabc\r\n", b"3\r\nabcXY"):
        with pytest.raises(ConnectionError):
            Body("chunked", 0, True).feed(bad)


def test_length_and_keep_alive_framing() -> None:
    body = Body.of("HTTP/1.1", {"content-length": "5"})
    assert body.feed(b"abc") == b"abc" and not body.complete
    assert body.feed(b"deXX") == b"de" and body.complete and body.leftover == b"XX"
    assert body.keep_alive
    assert not Body.of("HTTP/1.1", {"connection": "close", "content-length": "1"}).keep_alive
    assert not Body.of("HTTP/1.0", {"content-length": "1"}).keep_alive
    assert Body.of("HTTP/1.1", {}).mode == "close"
    assert Body.of("HTTP/1.1", {"transfer-encoding": "chunked"}).mode == "chunked"


def test_target_parsing() -> None:
    t = Target.parse("https://example.org/prefix/v1/completions?x=1")
    assert (t.host, t.port, t.tls, t.path, t.host_header) == (
        "example.org",
        443,
        True,
        "/prefix/v1/completions?x=1",
        "example.org",
    )
    t = Target.parse("http://[::1]:8000/v1/completions")
    assert (t.host, t.port, t.host_header) == ("::1", 8000, "[::1]:8000")


SSE_OK = chunked(
    b'data: {"choices":[{"index":0,"text":"a"}]}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\n',
    b"data: [DONE]\n\n",
)


async def one_shot_server(served: list[int]) -> asyncio.AbstractServer:
    """Answers the first request of each connection, then reads the next one and hangs up without
    a byte: what a server's keep-alive timeout looks like when it races the client's next send."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for n in range(2):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            if n == 1:
                break
            served.append(1)
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + SSE_OK)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_raw_transport_resends_on_a_stale_keep_alive_socket() -> None:
    async def scenario() -> tuple[list[RequestRecord], list[int]]:
        served: list[int] = []
        server = await one_shot_server(served)
        port = server.sockets[0].getsockname()[1]
        client = _Client(
            f"http://127.0.0.1:{port}", MODEL, wl(n=2, c=1), None, None, None, None, "raw"
        )
        client.t0 = time.perf_counter()
        slot: list[object] = [None]
        records = [RequestRecord(index=i, start=0.0) for i in range(3)]
        for rec in records:
            await client._request(rec, "p", slot)
        server.close()
        return records, served

    records, served = asyncio.run(scenario())
    assert [r.ok for r in records] == [True, True, True], [r.error for r in records]
    assert [r.output_tokens for r in records] == [1, 1, 1] and len(served) == 3
