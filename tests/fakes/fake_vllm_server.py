"""The HTTP side of the fake vLLM: `FakeOpenAIServer` with an engine's limits and faults.

`fake_vllm.py` is the process (argv, log lines, EngineCore child); this module is what a request
meets: `/health` (503 once the engine died), `/metrics` with `vllm:cache_config_info`, max-num-seqs
as a real limit (the rest wait), and the per-request faults (HTTP 500 share, in-band error,
truncated and stalled streams, an in-band error for streams running when the engine dies).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import socket
import threading
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tests.fakes.fake_config import ARRIVAL, SCHEDULED, FakeConfig
from tests.fakes.fake_openai import FakeOpenAIServer

if TYPE_CHECKING:
    from tests.fakes.fake_vllm import Faults

Body = dict[str, Any]
DEV_MODE = "VLLM_SERVER_DEV_MODE"  # vLLM's dev endpoints (sleep mode among them) need it on
AWAKE_ENV = "FAKE_VLLM_AWAKE"  # a file: one JSON line per serving, asleep, awake, exit
WEIGHTS_BYTES = 0.25 * 2**30  # fake_vllm.WEIGHTS_GIB


class _EngineDied(Exception):
    def __init__(self, resp: web.StreamResponse) -> None:
        super().__init__("engine died mid-stream")
        self.resp = resp


class FakeVllmServer(FakeOpenAIServer):
    """`FakeOpenAIServer` on a socket bound beforehand, with the engine's limits and faults."""

    def __init__(
        self, config: FakeConfig, sock: socket.socket, faults: Faults, state: dict[str, Any]
    ) -> None:
        super().__init__(config, port=sock.getsockname()[1])
        self.sock, self.state, self.faults = sock, state, faults
        self.eff: dict[str, Any] = state["effective"]
        self.engine_dead = threading.Event()
        self.running = 0
        self.max_running = 0
        self._slots: asyncio.Semaphore | None = None
        self.sleep_level = 0  # 0 awake; 1 weights offloaded, KV dropped; 2 both dropped
        self.sleeps = 0  # how many times it fell asleep
        self.note_awake("serving")

    def note_awake(self, event: str) -> None:
        """One line of FAKE_VLLM_AWAKE: this server began serving, slept, woke or exited."""
        path = os.environ.get(AWAKE_ENV)
        if path:
            line = {"pid": os.getpid(), "event": event, "t": time.time()}
            with open(path, "a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")

    @property
    def sleep_mode(self) -> bool:
        """vLLM serves its sleep endpoints only with the flag and in dev mode."""
        flags = self.state.get("flags") or {}
        return bool(flags.get("enable_sleep_mode")) and os.environ.get(DEV_MODE) == "1"

    def app(self) -> web.Application:
        app = super().app()
        app.router.add_get("/fake/state", self._state)
        if self.sleep_mode:
            app.router.add_post("/sleep", self._sleep)
            app.router.add_post("/wake_up", self._wake_up)
            app.router.add_get("/is_sleeping", self._is_sleeping)
        return app

    def device_bytes(self) -> int:
        """What it holds on the (pretend) device: weights and KV awake, nothing asleep."""
        if self.sleep_level:
            return 0
        return int(WEIGHTS_BYTES + int(self.eff["kv_cache_memory_bytes"]))

    async def _sleep(self, request: web.Request) -> web.Response:
        try:
            level = int(request.query.get("level", "1"))
        except ValueError:
            return web.Response(status=400, text="level must be 1 or 2")
        if level not in (1, 2):
            return web.Response(status=400, text="level must be 1 or 2")
        if self.faults.sleep_fails:  # fake_vllm fault sleep_fails: stays awake
            return web.Response(status=500, text="sleep failed (fake_vllm fault sleep_fails)")
        if not self.sleep_level:
            self.sleeps += 1
            self.note_awake("asleep")
        self.sleep_level = level
        return web.Response(status=200, text="")

    async def _wake_up(self, request: web.Request) -> web.Response:
        if self.sleep_level and self.faults.wake_kv_tokens is not None:
            tokens = int(self.faults.wake_kv_tokens)  # a wake that did not give the KV back
            self.eff["kv_cache_size_tokens"] = tokens
            self.eff["num_gpu_blocks"] = tokens // int(self.eff["block_size"])
        if self.sleep_level and self.faults.wake_itl_ms is not None:
            self.config.itl_ms = float(self.faults.wake_itl_ms)  # slower after a wake
        if self.sleep_level:
            self.note_awake("awake")
        self.sleep_level = 0
        return web.Response(status=200, text="")

    async def _is_sleeping(self, request: web.Request) -> web.Response:
        return web.json_response({"is_sleeping": bool(self.sleep_level)})

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app(), shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        self.port = self.sock.getsockname()[1]
        self._slots = asyncio.Semaphore(self.eff["max_num_seqs"])
        await web.SockSite(self._runner, self.sock, backlog=4096).start()

    async def _state(self, request: web.Request) -> web.Response:
        s = self.stats
        live = {"engine_alive": not self.engine_dead.is_set(), "requests": s.requests}
        live |= {
            "running": self.running,
            "max_running": self.max_running,
            "waiting": s.current - self.running,
            "sleep_level": self.sleep_level,
            "sleeps": self.sleeps,
            "device_bytes": self.device_bytes(),
        }
        return web.json_response({**self.state, **live})

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=503 if self.engine_dead.is_set() else 200, text="")

    async def _models(self, request: web.Request) -> web.Response:
        card = {"id": self.config.model, "object": "model", "owned_by": "vllm"}
        card["max_model_len"] = self.eff["max_model_len"]
        return web.json_response({"object": "list", "data": [card]})

    async def _metrics(self, request: web.Request) -> web.Response:
        s, eff = self.stats, self.eff
        labels = f'engine="0",model_name="{self.config.model}"'
        usage = min(1.0, self.running * 64 / max(1, eff["kv_cache_size_tokens"]))
        values = {
            "num_requests_running": ("gauge", self.running),
            "num_requests_waiting": ("gauge", s.current - self.running),
            "kv_cache_usage_perc": ("gauge", usage),
            "prompt_tokens_total": ("counter", s.prompt_tokens_total),
            "generation_tokens_total": ("counter", s.generation_tokens_total),
        }
        lines = []
        for name, (kind, value) in values.items():
            lines += [f"# TYPE vllm:{name} {kind}", f"vllm:{name}{{{labels}}} {float(value)}"]
        lines += [
            "# TYPE vllm:request_success_total counter",
            f'vllm:request_success_total{{{labels},finished_reason="length"}} '
            f"{float(s.request_success_total)}",
        ]
        cache = {
            "block_size": eff["block_size"],
            "cache_dtype": eff["kv_cache_dtype"],
            "enable_prefix_caching": eff["enable_prefix_caching"],
            "engine": 0,
            "gpu_memory_utilization": eff["gpu_memory_utilization"],
            "kv_cache_memory_bytes": eff["kv_cache_memory_bytes"]
            if eff.get("kv_asked") or not self.faults.kv_label_unasked
            else None,
            "kv_cache_size_tokens": eff["kv_cache_size_tokens"],
            "num_gpu_blocks": eff["num_gpu_blocks"],
        }
        text = ",".join(f'{k}="{v}"' for k, v in cache.items())
        lines += ["# TYPE vllm:cache_config_info gauge", f"vllm:cache_config_info{{{text}}} 1.0"]
        lines += self.histogram_lines(labels)
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    def _mode(self, ordinal: int, prompt: str) -> tuple[str, int]:
        f = self.faults
        share = f.http500_share
        if share and math.floor((ordinal + 1) * share) > math.floor(ordinal * share):
            return "http500", 0
        for mode, after in (
            ("stall", f.stall_after),
            ("error_after", f.inband_error_after),
            ("early_end", f.truncate_after),
        ):
            if after is not None:
                return mode, after
        return super()._mode(ordinal, prompt)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        if self.sleep_level:
            error = {"message": "the engine is sleeping", "type": "ServiceUnavailable", "code": 503}
            return web.json_response({"error": error}, status=503)
        if self.engine_dead.is_set():
            error = {
                "message": "EngineCore encountered an issue. See stack trace (above) for the "
                "root cause.",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            }
            return web.json_response({"error": error}, status=500)
        return await super()._generate(request, chat)

    async def _stream(
        self, request: web.Request, body: Body, chat: bool, prompt: str, mode: str, arg: int
    ) -> web.StreamResponse:
        assert self._slots is not None
        async with self._slots:  # max-num-seqs: the rest wait, as in vLLM's scheduler
            request[SCHEDULED] = time.perf_counter()
            self.running += 1
            self.max_running = max(self.max_running, self.running)
            try:
                if mode == "stall":
                    return await self._stall(request, chat, arg)
                return await super()._stream(request, body, chat, prompt, mode, arg)
            except _EngineDied as died:
                return died.resp
            finally:
                self.running -= 1

    async def _stall(self, request: web.Request, chat: bool, tokens: int) -> web.StreamResponse:
        """`tokens` chunks, then silence on an open connection until the client gives up."""
        c = self.config
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await asyncio.sleep(c.ttft_ms / 1000.0)
        head = {
            "id": f"cmpl-fake-{self.stats.requests}",
            "created": int(time.time()),
            "model": c.model,
        }
        head["object"] = "chat.completion.chunk" if chat else "text_completion"
        arrival = request.get(ARRIVAL, time.perf_counter())
        times: list[float] = []
        for n in range(tokens):
            await asyncio.sleep(c.itl_ms / 1000.0 if n else 0.0)
            choice = (
                {"index": 0, "delta": {"content": c.token_text}}
                if chat
                else {"index": 0, "text": c.token_text}
            )
            await self._write(
                resp, self._event({**head, "choices": [{**choice, "finish_reason": None}]})
            )
            self._token(times, arrival, 1)
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(0.05)
        return resp

    async def _write(self, resp: web.StreamResponse, data: bytes) -> None:
        if self.engine_dead.is_set():  # vLLM ends a running stream with an in-band error
            error = {
                "message": "EngineCore encountered an issue.",
                "type": "EngineDeadError",
                "code": 500,
            }
            await super()._write(resp, self._event({"error": error}))
            await super()._write(resp, self._event("[DONE]"))
            await resp.write_eof()
            raise _EngineDied(resp)
        await super()._write(resp, data)
