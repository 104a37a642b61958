"""A small fake of vLLM's OpenAI-compatible server, for tests that must not start the real engine.

It streams like vLLM (compact JSON chunks, a usage-only chunk with `"choices":[]`, `data: [DONE]`),
and can misbehave on purpose: HTTP 500, an error object inside a 200 stream, a hang, a stream that
ends early, one that stalls after N tokens, one that sends only SSE keep-alive comments after N
tokens (none: `FakeConfig.keepalive_only`, every stream), one without usage or without any choices
chunk, 401 on a wrong key, 404 on an unknown model, a forged usage (`FakeConfig.usage_override`,
every stream). A misbehaviour is chosen per request either by
arrival order (`FakeConfig.*_on` sets, 0-based, warm-ups included) or by a marker inside the
prompt, e.g. `[[http500]]`, `[[error_after=3]]`, `[[hang]]`, `[[early_end=2]]`,
`[[stall_after=1]]`, `[[keepalive_after=1]]`, `[[no_usage]]`, `[[no_choices]]`.

Run in-process with `with FakeOpenAIServer(FakeConfig(...)) as srv: srv.base_url`, or standalone:
`python -m tests.fakes.fake_openai --port 8123 --ttft-ms 20 --itl-ms 5`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from aiohttp import web

from tests.fakes.fake_config import (
    ARRIVAL,
    SCHEDULED,
    FakeConfig,
    FakeStats,
    ServerAccounting,
    fake_tokens,
)

__all__ = [
    "ARRIVAL",
    "SCHEDULED",
    "FakeConfig",
    "FakeOpenAIServer",
    "FakeStats",
    "fake_server",
    "fake_tokens",
]

_MARKER = re.compile(
    r"\[\[(http500|error_after|hang|early_end|stall_after|keepalive_after|no_usage|no_choices)"
    r"(?:=(\d+))?\]\]"
)


class FakeOpenAIServer(ServerAccounting):
    """The fake, served from a background thread with its own event loop, on 127.0.0.1."""

    def __init__(self, config: FakeConfig | None = None, port: int = 0) -> None:
        self.config = config or FakeConfig()
        self.stats = FakeStats()
        self._port = port
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- lifecycle -------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        if self.config.tokenize:
            app.router.add_post("/tokenize", self._tokenize)
            app.router.add_post("/detokenize", self._detokenize)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def _start(self) -> None:
        self._runner = web.AppRunner(
            self.app(),
            shutdown_timeout=0.5,
            access_log=None,
            keepalive_timeout=self.config.keepalive_timeout,
        )
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, backlog=4096).start()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._start())
        except BaseException as exc:  # surfaced to the caller of start()
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        loop.run_forever()
        assert self._runner is not None
        loop.run_until_complete(self._runner.cleanup())
        loop.close()

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._serve, name="fake-openai", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise RuntimeError(f"fake server did not start: {self._error}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- helpers ---------------------------------------------------------------------------------
    def _authorized(self, request: web.Request) -> bool:
        header = request.headers.get("Authorization")
        self.stats.authorization.append(header)
        key = self.config.api_key
        return key is None or header == f"Bearer {key}"

    @staticmethod
    def _unauthorized() -> web.Response:
        return web.json_response({"error": "Unauthorized"}, status=401)

    def _dumps(self, obj: Any) -> str:
        if self.config.spaced_json:
            return json.dumps(obj)
        return json.dumps(obj, separators=(",", ":"))

    def _event(self, obj: Any) -> bytes:
        sep = "\r\n\r\n" if self.config.crlf else "\n\n"
        body = obj if isinstance(obj, str) else self._dumps(obj)
        return f"data: {body}{sep}".encode()

    async def _write(self, resp: web.StreamResponse, data: bytes) -> None:
        if self.config.split_writes and len(data) > 3:
            third = len(data) // 3
            for part in (data[:third], data[third : 2 * third], data[2 * third :]):
                await resp.write(part)
                await asyncio.sleep(0.001)
        else:
            await resp.write(data)

    # --- routes ----------------------------------------------------------------------------------
    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(text="")

    async def _models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._unauthorized()
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.config.model,
                        "object": "model",
                        "owned_by": "fake",
                        "max_model_len": 4096,
                    }
                ],
            }
        )

    async def _tokenize(self, request: web.Request) -> web.Response:
        data = await request.json()
        tokens = fake_tokens(str(data.get("prompt", "")))
        return web.json_response({"tokens": tokens, "count": len(tokens), "max_model_len": 4096})

    async def _detokenize(self, request: web.Request) -> web.Response:
        data = await request.json()
        text = bytes(int(i) & 0xFF for i in data.get("tokens", [])).decode("utf-8", "replace")
        return web.json_response({"prompt": text})

    async def _metrics(self, request: web.Request) -> web.Response:
        s, m = self.stats, self.config.model
        lines = [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            f'vllm:num_requests_running{{model_name="{m}"}} {float(s.current)}',
            "# TYPE vllm:num_requests_waiting gauge",
            f'vllm:num_requests_waiting{{model_name="{m}"}} 0.0',
            "# TYPE vllm:kv_cache_usage_perc gauge",
            f'vllm:kv_cache_usage_perc{{model_name="{m}"}} {min(1.0, s.current / 100.0)}',
            "# TYPE vllm:generation_tokens_total counter",
            f'vllm:generation_tokens_total{{model_name="{m}"}} {float(s.generation_tokens_total)}',
            "# TYPE vllm:prompt_tokens_total counter",
            f'vllm:prompt_tokens_total{{model_name="{m}"}} {float(s.prompt_tokens_total)}',
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{finished_reason="length",model_name="{m}"}} '
            f"{float(s.request_success_total)}",
            *self.histogram_lines(f'model_name="{m}"'),
        ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    def _mode(self, ordinal: int, prompt: str) -> tuple[str, int]:
        c = self.config
        m = _MARKER.search(prompt)
        if m:
            return m.group(1), int(m.group(2) or 0)
        if ordinal in c.fail_http_on:
            return "http500", 0
        if ordinal in c.hang_on:
            return "hang", 0
        if ordinal in c.error_after:
            return "error_after", c.error_after[ordinal]
        if ordinal in c.early_end_on:
            return "early_end", c.early_end_on[ordinal]
        if ordinal in c.no_choices_on:
            return "no_choices", 0
        if c.keepalive_only:
            return "keepalive_after", 0
        if c.no_usage:
            return "no_usage", 0
        return "ok", 0

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        c, s = self.config, self.stats
        request[ARRIVAL] = time.perf_counter()  # where vLLM's latencies start
        s.paths.append(request.path)
        if not self._authorized(request):
            return self._unauthorized()
        body = await request.json()
        with self._lock:
            ordinal = s.requests
            s.requests += 1
        s.bodies.append(body)
        if body.get("model") != c.model:
            return web.json_response(
                {
                    "error": {
                        "message": f"The model `{body.get('model')}` does not exist.",
                        "type": "NotFoundError",
                        "param": "model",
                        "code": 404,
                    }
                },
                status=404,
            )
        if chat:
            prompt = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        else:
            prompt = str(body.get("prompt", ""))
        mode, arg = self._mode(ordinal, prompt)
        if mode == "http500":
            message = "injected failure"
            if c.echo_auth_in_errors:
                message += f" (you sent {request.headers.get('Authorization')})"
            return web.json_response(
                {"error": {"message": message, "type": "InternalServerError", "code": 500}},
                status=500,
            )
        s.current += 1
        s.max_concurrent = max(s.max_concurrent, s.current)
        s.concurrency_samples.append(s.current)
        try:
            return await self._stream(request, body, chat, prompt, mode, arg)
        finally:
            s.current -= 1

    async def _keep_alive(self, request: web.Request, resp: web.StreamResponse) -> None:
        """Alive, saying nothing: SSE comments until the client gives up."""
        while request.transport is not None and not request.transport.is_closing():
            try:
                await resp.write(b": keep-alive\n\n")
            except ConnectionError:  # the client closed between the check and the write
                return
            await asyncio.sleep(self.config.keepalive_ms / 1000.0)

    async def _stream(
        self,
        request: web.Request,
        body: dict[str, Any],
        chat: bool,
        prompt: str,
        mode: str,
        arg: int,
    ) -> web.StreamResponse:
        c, s = self.config, self.stats
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        if mode == "hang":  # until the client gives up and closes the connection
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.02)
            return resp
        if mode == "keepalive_after" and arg == 0:  # not even chat's role chunk
            await self._keep_alive(request, resp)
            return resp
        max_tokens = int(body.get("max_tokens") or 16)
        prompt_tokens = len(fake_tokens(prompt))
        self._count("prompt_tokens_total", prompt_tokens)
        arrival = request.get(ARRIVAL, time.perf_counter())
        times: list[float] = []  # when each token chunk was written
        rid = f"cmpl-fake-{s.requests}"
        kind = "chat.completion.chunk" if chat else "text_completion"
        head = {"id": rid, "object": kind, "created": int(time.time()), "model": c.model}
        tpc = max(1, c.tokens_per_chunk)
        sizes = [min(tpc, max_tokens - k) for k in range(0, max_tokens, tpc)]
        interval = max(1, c.stream_interval)
        if interval > 1:  # vLLM's: the first token at once, then every N, the rest at the end
            sizes = [1] + [min(interval, max_tokens - k) for k in range(1, max_tokens, interval)]
        if c.ttft_ms:
            await asyncio.sleep(c.ttft_ms / 1000.0)
        if mode != "no_choices":
            if chat and c.chat_role_chunk:
                await self._write(
                    resp,
                    self._event(
                        {
                            **head,
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {"role": "assistant", "content": ""},
                                    "logprobs": None,
                                    "finish_reason": None,
                                }
                            ],
                        }
                    ),
                )
            for n, size in enumerate(sizes):
                if (
                    mode in ("error_after", "early_end", "stall_after", "keepalive_after")
                    and n >= arg
                ):
                    break
                if n and c.itl_ms:
                    pace = (1 + size) / 2 if interval > 1 else 1.0
                    await asyncio.sleep(c.itl_ms * pace / 1000.0)
                last = n == len(sizes) - 1
                text = c.token_text * size
                choice: dict[str, Any] = {
                    "index": 0,
                    "logprobs": None,
                    "finish_reason": "length" if last else None,
                }
                if chat:
                    choice["delta"] = {"content": text}
                else:
                    choice["text"] = text
                    choice["stop_reason"] = None
                # stamped before it is written, as vLLM stamps a token before the API server
                # streams it: stamped after, the client's thread could read the chunk first
                # (GIL, a busy machine) and see a TTFT below the server's own (-0.39 ms once)
                self._token(times, arrival, size)
                await self._write(resp, self._event({**head, "choices": [choice]}))
        if mode == "ok" and times:
            self._finished(request, arrival, times)
        if mode == "early_end":
            await resp.write_eof()
            return resp
        if mode == "stall_after":  # silence on an open connection until the client gives up
            while request.transport is not None and not request.transport.is_closing():
                await asyncio.sleep(0.02)
            return resp
        if mode == "keepalive_after":
            await self._keep_alive(request, resp)
            return resp
        if mode == "error_after":
            if c.error_style == "object":
                err: dict[str, Any] = {
                    "object": "error",
                    "message": "injected stream error",
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            else:
                err = {
                    "error": {
                        "message": "injected stream error",
                        "type": "InternalServerError",
                        "param": None,
                        "code": 500,
                    }
                }
            await self._write(resp, self._event(err))
            await self._write(resp, self._event("[DONE]"))
            await resp.write_eof()
            return resp
        if mode != "no_usage":
            await self._write(
                resp,
                self._event(
                    {
                        **head,
                        "choices": [],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "total_tokens": prompt_tokens + max_tokens,
                            "completion_tokens": max_tokens,
                            **c.usage_override,
                        },
                    }
                ),
            )
        await self._write(resp, self._event("[DONE]"))
        await resp.write_eof()
        return resp


@contextmanager
def fake_server(**config: Any) -> Iterator[FakeOpenAIServer]:
    """`with fake_server(ttft_ms=5) as srv:` -> a started fake, stopped on exit."""
    server = FakeOpenAIServer(FakeConfig(**config)).start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible streaming server (tests).")
    parser.add_argument("--port", type=int, default=8123)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument(
        "--require-key-from-env",
        action="store_true",
        help="require Bearer $OPENAI_API_KEY (the key is never a flag)",
    )
    args = parser.parse_args(argv)
    import os

    key = os.environ.get("OPENAI_API_KEY") if args.require_key_from_env else None
    server = FakeOpenAIServer(
        FakeConfig(
            model=args.model,
            api_key=key,
            ttft_ms=args.ttft_ms,
            itl_ms=args.itl_ms,
            tokens_per_chunk=args.tokens_per_chunk,
        ),
        port=args.port,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with server:
        print(f"fake OpenAI server on {server.base_url}", flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
