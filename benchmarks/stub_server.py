"""An instant streaming stub of vLLM's OpenAI server, for measuring clients, not servers.

Why not the aiohttp fake from tests/: a framework costs the stub CPU that the client under test then
cannot use on a 2-core machine. This is a bare asyncio protocol (uvloop when installed) with every
SSE chunk pre-encoded, byte-compatible with vLLM's compact JSON and chunked transfer encoding.
Between chunks each stream yields to the loop, so C streams interleave one chunk at a time, like an
engine step that emits one token for every running request; with `--itl-ms` it paces them instead.
With `--whole` each response goes out in one write as soon as its request is read (every token's
event still its own chunk): the cheapest server per request, for measuring a client's request rate.

With `--aiohttp` the same responses go out through aiohttp's web server (one write, one HTTP chunk,
per event): a framework server, as many OpenAI-compatible gateways are, which costs more CPU a
token than the bare protocol.

    python benchmarks/stub_server.py --port 8321 [--itl-ms 0 | --whole | --aiohttp] [--model tiny]

Routes: GET /health, GET /v1/models, POST /v1/completions, POST /v1/chat/completions (404 for the
rest, so `vllm bench serve` skips its /tokenize alignment and /metrics scrape).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import socket
from typing import Any


def _chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk (chunked transfer encoding)."""
    return b"%x\r\n%s\r\n" % (len(data), data)


class Stub:
    """Pre-encoded responses for one served model name."""

    def __init__(self, model: str, itl_ms: float, whole: bool = False) -> None:
        self.model = model
        self.itl_s = itl_ms / 1000.0
        self.whole = whole
        self.streams = 0
        head = {"id": "cmpl-stub", "object": "text_completion", "created": 0, "model": model}
        chead = {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }

        def event(obj: Any) -> bytes:
            return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")

        def text_choice(finish: str | None) -> dict[str, Any]:
            return {
                "index": 0,
                "text": " tok",
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
            }

        def chat_choice(finish: str | None) -> dict[str, Any]:
            return {
                "index": 0,
                "delta": {"content": " tok"},
                "logprobs": None,
                "finish_reason": finish,
            }

        self.mid = {
            False: event({**head, "choices": [text_choice(None)]}),
            True: event({**chead, "choices": [chat_choice(None)]}),
        }
        self.last = {
            False: event({**head, "choices": [text_choice("length")]}),
            True: event({**chead, "choices": [chat_choice("length")]}),
        }
        self.role = event(
            {
                **chead,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ],
            }
        )
        self.head = {False: head, True: chead}
        self.done = _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
        self.models = json.dumps(
            {"object": "list", "data": [{"id": model, "object": "model", "owned_by": "stub"}]}
        ).encode()

    def response(self, chat: bool, n: int, prompt_tokens: int) -> bytes:
        """A whole streamed response of `n` tokens, head to the last chunk."""
        return b"".join(
            [
                STREAM_HEAD,
                self.role if chat else b"",
                self.mid[chat] * (n - 1),
                self.last[chat],
                self.usage(chat, prompt_tokens, n),
                self.done,
            ]
        )

    def usage(self, chat: bool, prompt_tokens: int, n: int) -> bytes:
        obj = {
            **self.head[chat],
            "choices": [],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "total_tokens": prompt_tokens + n,
                "completion_tokens": n,
            },
        }
        return _chunk(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)


def _plain(status: str, body: bytes, ctype: str = "application/json") -> bytes:
    return (
        f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\n"
        f"content-length: {len(body)}\r\n\r\n".encode()
        + body
    )


class StubProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request at a time per connection, as streaming clients use it."""

    def __init__(self, stub: Stub) -> None:
        self.stub = stub
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.can_write: asyncio.Event | None = None
        self.task: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.can_write = asyncio.Event()
        self.can_write.set()
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.task is not None:
            self.task.cancel()
        assert self.can_write is not None
        self.can_write.set()

    def pause_writing(self) -> None:
        assert self.can_write is not None
        self.can_write.clear()

    def resume_writing(self) -> None:
        assert self.can_write is not None
        self.can_write.set()

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end]).decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            if len(self.buf) < end + 4 + length:
                return
            body = bytes(self.buf[end + 4 : end + 4 + length])
            del self.buf[: end + 4 + length]
            method, path = (head.split(" ", 2) + ["", ""])[:2]
            self.handle(method, path.split("?", 1)[0], body)

    def handle(self, method: str, path: str, body: bytes) -> None:
        assert self.transport is not None
        if method == "GET" and path == "/health":
            self.transport.write(_plain("200 OK", b""))
        elif method == "GET" and path in ("/v1/models", "/models"):
            self.transport.write(_plain("200 OK", self.stub.models))
        elif method == "POST" and path in ("/v1/completions", "/v1/chat/completions"):
            req = json.loads(body)
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            chat = path.endswith("chat/completions")
            text = req["messages"][-1]["content"] if chat else req.get("prompt", "")
            prompt_tokens = max(1, len(str(text)) // 4)
            if self.stub.whole:
                self.transport.write(self.stub.response(chat, n, prompt_tokens))
                return
            self.task = asyncio.get_running_loop().create_task(self.stream(chat, n, prompt_tokens))
        else:
            self.transport.write(_plain("404 Not Found", b'{"detail":"Not Found"}'))

    async def stream(self, chat: bool, n: int, prompt_tokens: int) -> None:
        t = self.transport
        assert t is not None and self.can_write is not None
        stub = self.stub
        stub.streams += 1
        mid = stub.mid[chat]
        sleep = asyncio.sleep
        pause = stub.itl_s
        t.write(STREAM_HEAD + (stub.role if chat else b""))
        for _ in range(n - 1):
            await sleep(pause)
            if not self.can_write.is_set():
                await self.can_write.wait()
            if t.is_closing():
                return
            t.write(mid)
        await sleep(pause)
        if t.is_closing():
            return
        t.write(stub.last[chat] + stub.usage(chat, prompt_tokens, n) + stub.done)


async def serve_aiohttp(port: int, model: str, itl_ms: float, ready: Any = None) -> None:
    """The same responses through aiohttp's web server: one `write` (one HTTP chunk) per event,
    a yield to the loop between them. A framework server, as many OpenAI-compatible gateways are;
    it costs the server more CPU than the bare protocol, which the client under test then shares."""
    from aiohttp import web

    stub = Stub(model, itl_ms)

    def payload(event: bytes) -> bytes:
        """An event pre-encoded as an HTTP chunk -> the bare event (aiohttp chunks it again)."""
        return event.split(b"\r\n", 1)[1][:-2]

    mid = {chat: payload(e) for chat, e in stub.mid.items()}
    last = {chat: payload(e) for chat, e in stub.last.items()}
    role = payload(stub.role)

    async def health(request: web.Request) -> web.Response:
        return web.Response(body=b"")

    async def models(request: web.Request) -> web.Response:
        return web.Response(body=stub.models, content_type="application/json")

    async def generate(request: web.Request) -> web.StreamResponse:
        req = await request.json()
        n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
        chat = request.path.endswith("chat/completions")
        text = req["messages"][-1]["content"] if chat else req.get("prompt", "")
        prompt_tokens = max(1, len(str(text)) // 4)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if chat:
            await resp.write(role)
        pause = stub.itl_s
        event = mid[chat]
        for _ in range(n - 1):
            await asyncio.sleep(pause)
            await resp.write(event)
        await asyncio.sleep(pause)
        await resp.write(last[chat])
        await resp.write(payload(stub.usage(chat, prompt_tokens, n)))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=4096, reuse_address=True)
    await site.start()
    if ready is not None:
        ready(port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


async def serve(
    port: int, model: str, itl_ms: float, ready: Any = None, whole: bool = False
) -> None:
    """Serve until cancelled; `ready`, if given, is called with the bound port."""
    loop = asyncio.get_running_loop()
    stub = Stub(model, itl_ms, whole)
    server = await loop.create_server(
        lambda: StubProtocol(stub), "127.0.0.1", port, backlog=4096, reuse_address=True
    )
    bound = server.sockets[0].getsockname()[1]
    if ready is not None:
        ready(bound)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):
            pass
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8321)
    parser.add_argument("--model", default="tiny")
    parser.add_argument(
        "--itl-ms",
        type=float,
        default=0.0,
        help="pause between chunks; 0 = only yield to the loop (instant)",
    )
    parser.add_argument(
        "--whole", action="store_true", help="each response in one write, no pause (instant)"
    )
    parser.add_argument(
        "--aiohttp",
        action="store_true",
        help="serve through aiohttp's web server (a framework server) instead of the bare protocol",
    )
    args = parser.parse_args(argv)
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:
        runner = asyncio.Runner()
    announce = lambda p: print(f"stub on http://127.0.0.1:{p}", flush=True)  # noqa: E731
    with runner:
        if args.aiohttp:
            runner.run(serve_aiohttp(args.port, args.model, args.itl_ms, ready=announce))
            return 0
        runner.run(
            serve(
                args.port,
                args.model,
                args.itl_ms,
                ready=announce,
                whole=args.whole,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
