"""The fake OpenAI server's configuration, what it saw, and its own accounting: vLLM's token
counters and latency histograms, which it updates `counter_lag_ms` late, as vLLM's stat logger runs
after the output handler has already handed the tokens to the HTTP response."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

ARRIVAL = web.RequestKey("arrival", float)  # when the request came in (vLLM's arrival_time)
SCHEDULED = web.RequestKey("scheduled", float)  # when it got an engine slot (fake_vllm)


@dataclass
class FakeConfig:
    """How the fake behaves. Times in milliseconds; `*_on` are 0-based arrival ordinals."""

    model: str = "fake-model"
    api_key: str | None = None
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    tokens_per_chunk: int = 1
    # vLLM's --stream-interval N: the first token alone, then N tokens a chunk, the rest last; a
    # chunk's pause is half per chunk (streaming), half per token (`itl_ms` a token): fewer,
    # larger chunks take longer each and less per token, as on a GPU.
    stream_interval: int = 1
    token_text: str = " tok"
    fail_http_on: set[int] = field(default_factory=set)
    error_after: dict[int, int] = field(default_factory=dict)  # ordinal -> chunks before the error
    hang_on: set[int] = field(default_factory=set)
    early_end_on: dict[int, int] = field(default_factory=dict)  # ordinal -> chunks before the end
    no_usage: bool = False
    no_choices_on: set[int] = field(default_factory=set)
    keepalive_only: bool = False  # every stream: SSE keep-alive comments only, no data, ever
    keepalive_ms: float = 100.0  # between two keep-alive comments
    error_style: str = "error"  # "error": {"error": {...}}; "object": {"object": "error", ...}
    spaced_json: bool = False  # `"choices": [` with spaces, like json.dumps defaults
    crlf: bool = False  # events separated by \r\n\r\n
    split_writes: bool = False  # write every event in small pieces (tests reassembly)
    chat_role_chunk: bool = True  # chat: a first chunk with the role and empty content, like vLLM
    echo_auth_in_errors: bool = False  # a careless server: error bodies repeat the Authorization
    keepalive_timeout: float = 75.0  # seconds an idle keep-alive connection is kept open
    tokenize: bool = True  # False: no /tokenize or /detokenize, like a gateway that is not vLLM
    # /metrics counts a request's tokens and latencies this late, as vLLM's stat logger runs after
    # the output handler has already handed the tokens to the HTTP response.
    counter_lag_ms: float = 0.0
    # A lying server: these fields replace the usage chunk's own (e.g. completion_tokens=1e9).
    usage_override: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeStats:
    """What the fake saw and served; the tests compare the client's records against it."""

    requests: int = 0
    current: int = 0
    max_concurrent: int = 0
    generation_tokens_total: int = 0
    prompt_tokens_total: int = 0
    request_success_total: int = 0
    authorization: list[str | None] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    concurrency_samples: list[int] = field(default_factory=list)
    # vLLM's latency histograms by name without "vllm:" -> [sum of seconds, count]
    histograms: dict[str, list[float]] = field(default_factory=dict)


def fake_tokens(text: str) -> list[int]:
    """The fake's tokenizer: one token per UTF-8 byte."""
    return list(text.encode("utf-8"))


class ServerAccounting:
    """vLLM's /metrics side of the fake: counters and histograms, updated late on purpose."""

    config: FakeConfig
    stats: FakeStats

    # --- the server's own accounting (late by `counter_lag_ms`) ---------------------------------
    def _later(self, apply: Callable[[], None]) -> None:
        lag = self.config.counter_lag_ms
        if lag > 0:
            asyncio.get_running_loop().call_later(lag / 1000.0, apply)
        else:
            apply()

    def _count(self, name: str, amount: float) -> None:
        s = self.stats
        self._later(lambda: setattr(s, name, getattr(s, name) + amount))

    def _observe(self, name: str, seconds: float) -> None:
        def apply() -> None:
            pair = self.stats.histograms.setdefault(name, [0.0, 0.0])
            pair[0] += seconds
            pair[1] += 1

        self._later(apply)

    def histogram_lines(self, labels: str) -> list[str]:
        """`_sum` and `_count` (and the +Inf bucket) of every histogram observed so far."""
        lines = []
        for name, (total, count) in sorted(self.stats.histograms.items()):
            lines += [
                f"# TYPE vllm:{name} histogram",
                f'vllm:{name}_bucket{{{labels},le="+Inf"}} {count}',
                f"vllm:{name}_count{{{labels}}} {count}",
                f"vllm:{name}_sum{{{labels}}} {total}",
            ]
        return lines

    def _token(self, times: list[float], arrival: float, size: int) -> None:
        """One chunk of `size` tokens written now: vLLM's token counter, TTFT or ITL."""
        t = time.perf_counter()
        if times:
            self._observe("inter_token_latency_seconds", t - times[-1])
        else:
            self._observe("time_to_first_token_seconds", t - arrival)
        times.append(t)
        self._count("generation_tokens_total", size)

    def _finished(self, request: web.Request, arrival: float, times: list[float]) -> None:
        """A request that generated all its tokens: its success and per-request histograms."""
        scheduled = request.get(SCHEDULED, arrival)
        self._observe("e2e_request_latency_seconds", times[-1] - arrival)
        self._observe("request_queue_time_seconds", scheduled - arrival)
        if len(times) > 1:
            tpot = (times[-1] - times[0]) / (len(times) - 1)
            self._observe("request_time_per_output_token_seconds", tpot)
        self._count("request_success_total", 1)
