"""The raw HTTP/1.1 transport: chunked and length framing at any split, keep-alive, targets, and a
request resent once on a keep-alive socket the server closed."""

from __future__ import annotations

import asyncio
import time

import pytest

from core.records import RequestRecord
from tests.factories import load_workload as wl
from tuning.measure.loadgen.client import _Client
from tuning.measure.loadgen.http1 import Body, Target

MODEL = "fake-model"


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
    # A whole short response in one read (the fast path), and payloads that only look like
    # the last chunk: the framing decides, never the bytes' look.
    for parts in ((b"data: a\n\n", b"data: bb\n\n"), (), (b"\r\n0\r\n\r\n",), (b"x\r\n0",)):
        body = Body("chunked", 0, True)
        assert body.feed(chunked(*parts)) == b"".join(parts) and body.complete, parts
        assert body.leftover == b""
    body = Body("chunked", 0, True)
    assert body.feed(b"7\r\nab\r\n0\r\n\r\n") == b"ab\r\n0\r\n" and not body.complete
    assert body.feed(b"0\r\n\r\n") == b"" and body.complete
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


def test_one_chunk_a_read_parses_as_the_whole_body_does() -> None:
    """The one-chunk-a-read path (a server that keeps up sends each token's event alone): every
    payload comes out as the general parser gives it, whatever it holds; a size line it cannot
    read (an extension, a malformed size) or a read that is not exactly one chunk goes the general
    way, and a chunk that lies about its size still fails."""
    parts = [b"data: a\n\n", b"x" * 300, b"\r\n0\r\n\r\n", b"ab\r\n", b"\r\n", b"0"]
    body = Body("chunked", 0, True)
    got = [body.feed(b"%x\r\n%s\r\n" % (len(p), p)) for p in parts]
    assert got == parts and not body.complete
    assert body.feed(b"0\r\n\r\n") == b"" and body.complete and body.leftover == b""
    body = Body("chunked", 0, True)
    assert body.feed(b"3;ext=1\r\nabc\r\n") == b"abc"  # an extension: the general path
    assert body.feed(b"2\r\nab\r\n2\r\ncd\r\n") == b"abcd"  # two chunks in one read
    assert body.feed(b"0\r\n\r\n") == b"" and body.complete
    for bad in (b"zz\r\nabc\r\n", b"3\r\nabcXY", b"4\r\nabc\r\n"):
        body = Body("chunked", 0, True)
        with pytest.raises(ConnectionError):
            body.feed(bad)
            body.feed(b"0\r\n\r\n")
