"""The closed-loop streaming client: exactly C requests in flight, one `RequestRecord` per request.

Why it is built this way:
- Closed loop with C workers pulling from one shared iterator (not N tasks behind a semaphore): a
  request is dispatched the moment a slot frees, no task waits on a lock, and the client's own
  queueing never hides inside a latency.
- Two transports behind one SSE reader. "aiohttp" (the default): one ClientSession, a pool of
  exactly C keep-alive sockets, a large read buffer (vllm#39963). "raw": the lab's own HTTP/1.1
  reader, one keep-alive socket per worker, parsing inside the socket callback; it spends about
  1.1-1.5x less CPU per token, because aiohttp runs several Python calls per HTTP chunk and vLLM
  sends one chunk per token (benchmarks/client_capacity.py measures both against vLLM's client).
- uvloop when present; the GC heap frozen and automatic GC off while measuring (process-wide: a
  young-generation collection runs from the monitor task only when garbage piles up).
- The SSE hot path works on bytes: a read that holds only content chunks is handled with a few C-level
  `bytes.count/find` calls, with no JSON parsing and no per-chunk objects beyond the ITL floats the
  record keeps. Only the first content chunk, the usage chunk, errors and anything unusual are parsed.
- Failures are counted, never dropped: every dispatched measured request yields a record, `ok=False`
  with an `error_kind` from `core.records.FAILURE_KINDS` when it failed.
- A stream that ends without a `usage` chunk is a failure (`no_usage`), its timings kept: the lab
  never counts chunks as tokens, and a silent fallback would mix two ways of counting in one number.
- The API key comes from OPENAI_API_KEY (or an explicit argument); it is sent as a Bearer header and
  scrubbed from every error text the lab stores.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import pickle
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import repeat
from typing import Any

import aiohttp

from core.records import RequestRecord
from tuning.workload import Workload, WorkloadError, server_root

Progress = Callable[[int, int], None]
TRANSPORTS: tuple[str, ...] = ("auto", "aiohttp", "raw")
# aiohttp: the reference design (one ClientSession, a pool of C keep-alive sockets). raw: the lab's
# own HTTP/1.1 reader, about 1.1-1.5x less client CPU per token (benchmarks/client_capacity.py).
DEFAULT_TRANSPORT = "auto"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def resolve_transport(transport: str, base_url: str) -> str:
    """ "auto": the lean raw reader for a plain-HTTP loopback server (every engine the lab starts),
    aiohttp for anything else (proxies, remote gateways, TLS)."""
    if transport != "auto":
        return transport
    parts = urllib.parse.urlsplit(base_url if "://" in base_url else "http://" + base_url)
    return "raw" if parts.scheme == "http" and parts.hostname in _LOOPBACK else "aiohttp"


PhaseCallback = Callable[[str], None]  # called with "warming_up", then "loading"

READ_BUFSIZE = 10 * 2**20  # bytes; aiohttp's 64 KiB default throttles long contexts (vllm#39963)
MONITOR_TICK_S = 0.010  # the loop-lag probe's sleep
TIMELINE_EVERY = 10  # ticks between in-flight samples (about 100 ms)
PROGRESS_EVERY = 25  # ticks between progress callbacks (about 250 ms)
GC_YOUNG_LIMIT = 200_000  # young objects before the monitor runs a gen-0/1 collection
ERROR_EXCERPT = 300  # characters of a server's error body kept in a record

_SEP = b"\n\n"
_CONTENT = b'"choices":[{'
_ERROR_KEY = b'"error":'
_USAGE = b'"usage":{'
_DONE = b"[DONE]"


class EndpointError(RuntimeError):
    """The endpoint cannot be used as given; the message says what to check."""


class LoadError(RuntimeError):
    """The load generator itself failed (not a request: those are records)."""


def api_key_from_env() -> str | None:
    """The only source of the key besides an explicit argument: never a flag, never argv."""
    key = os.environ.get("OPENAI_API_KEY", "").strip()
    return key or None


def display_url(url: str) -> str:
    """A URL safe to print or store: any user:password@ part removed."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def _scrub(text: str, secret: str | None) -> str:
    if secret:
        text = text.replace(secret, "***")
    return text


def check_endpoint(
    base_url: str, model: str, api_key: str | None = None, timeout_s: float = 10.0
) -> list[str]:
    """GET /v1/models and say plainly what is wrong; returns the served model ids.

    401/403 -> check OPENAI_API_KEY; 404, refused or unreachable -> check the base URL; a model that
    is not listed -> check the model name, with the names that are served.
    """
    try:
        root = server_root(base_url)
    except WorkloadError as exc:
        raise EndpointError(f"{exc}; check the base URL") from None
    shown = display_url(root)
    key = api_key if api_key is not None else api_key_from_env()
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    req = urllib.request.Request(root + "/v1/models", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            what = "no API key was sent" if not key else "the API key was refused"
            raise EndpointError(
                f"{shown}/v1/models answered HTTP {exc.code}: {what}; check OPENAI_API_KEY"
            ) from None
        if exc.code == 404:
            raise EndpointError(
                f"{shown}/v1/models answered HTTP 404: this is not an "
                "OpenAI-compatible server root; check the base URL"
            ) from None
        raise EndpointError(
            f"{shown}/v1/models answered HTTP {exc.code}; check the base URL "
            "and that the server is healthy"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer in {timeout_s:g} s"
        else:
            why = _scrub(str(reason), key)
        raise EndpointError(
            f"cannot reach {shown} ({why}); check the base URL and that the server is running"
        ) from None
    try:
        data = json.loads(body)
        served = [str(item["id"]) for item in data["data"]]
    except (ValueError, KeyError, TypeError):
        raise EndpointError(
            f"{shown}/v1/models did not answer a model list; check the base URL"
        ) from None
    if model not in served:
        raise EndpointError(
            f"model {model!r} is not served at {shown}; check the model name "
            f"(served: {', '.join(served) or 'none'})"
        )
    return served


@dataclass(repr=False)
class LoadResult:
    """What one run of the load generator produced: the measured records and the client's health.

    Times in `records` and `inflight` are seconds since `t0_perf_counter` (the first measured
    dispatch). `client_cpu_util` is CPU seconds of the whole process per wall second (1.0 = one
    core busy); `loop_cpu_s` is the event-loop thread's own CPU, which stays honest when telemetry
    threads share the process.
    """

    records: list[RequestRecord]
    duration_s: float
    started_at_unix: float
    t0_perf_counter: float
    concurrency: int
    client_cpu_s: float
    client_cpu_util: float
    loop_cpu_s: float
    loop_lag_mean_ms: float
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    inflight: list[tuple[float, int]] = field(default_factory=list)
    warmup_failed: int = 0
    warmup_errors: list[str] = field(default_factory=list)
    gc_collections: int = 0
    cancelled: bool = False

    def __repr__(self) -> str:
        # Short on purpose: asyncio.Runner formats the main task's result in a ValueError message
        # on its way out (signal.getsignal), and a full repr of a million records takes seconds.
        ok = sum(1 for r in self.records if r.ok)
        return (
            f"LoadResult({len(self.records)} records, {ok} ok, {self.duration_s:.3f} s, "
            f"C={self.concurrency}, cancelled={self.cancelled})"
        )

    def health(self) -> dict[str, Any]:
        """Everything but the records: the client-side facts stored next to the run."""
        out = asdict(self)
        out.pop("records")
        out["inflight"] = [list(p) for p in self.inflight]
        return out


@dataclass
class _Phase:
    prompts: Sequence[str]
    records: list[RequestRecord | None]
    done: int = 0


class _Client:
    """One session, one workload; `run()` does warm-ups then the measured phase."""

    def __init__(
        self,
        base_url: str,
        model: str,
        workload: Workload,
        api_key: str | None,
        on_progress: Progress | None,
        cancel: threading.Event | None,
        on_phase: PhaseCallback | None = None,
        transport: str = DEFAULT_TRANSPORT,
    ) -> None:
        if transport not in TRANSPORTS:
            raise LoadError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
        root = server_root(base_url)
        self.transport = resolve_transport(transport, root)
        self._slots: list[list[Any]] = []
        self.workload = workload
        self.url = root + (
            "/v1/chat/completions" if workload.endpoint == "chat" else "/v1/completions"
        )
        self.api_key = api_key
        self.on_progress = on_progress
        self.on_phase = on_phase
        self.cancel = cancel
        self.timeout = workload.request_timeout_s
        self.stop = False
        self.inflight = 0
        self.t0 = 0.0
        head = {
            "model": model,
            "max_tokens": workload.output_len,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        open_ = json.dumps(head, separators=(",", ":"))[:-1].encode()
        if workload.endpoint == "chat":
            self._body_head = open_ + b',"messages":[{"role":"user","content":'
            self._body_tail = b"}]}"
        else:
            self._body_head = open_ + b',"prompt":'
            self._body_tail = b"}"
        self.session: aiohttp.ClientSession | None = None
        self._raw_target = _Target.parse(self.url)
        head = (
            f"POST {self._raw_target.path} HTTP/1.1\r\nHost: {self._raw_target.host_header}\r\n"
            "User-Agent: vllm-tuning-lab\r\nAccept: text/event-stream\r\n"
            "Content-Type: application/json\r\n"
        )
        if api_key:
            head += f"Authorization: Bearer {api_key}\r\n"
        self._raw_head = (head + "Content-Length: ").encode("latin-1")

    def _body(self, prompt: str) -> bytes:
        return self._body_head + json.dumps(prompt).encode() + self._body_tail

    async def _request(self, rec: RequestRecord, prompt: str, slot: list[Any]) -> None:
        """Send one streaming request and fill `rec`; never raises except on cancellation.

        `slot` is the worker's own state: the raw transport keeps its keep-alive connection there.
        """
        body = self._body(prompt)
        st = time.perf_counter()
        rec.start = st - self.t0
        self.inflight += 1
        sse = _SSE(rec, st)
        try:
            async with asyncio.timeout(self.timeout):
                if self.transport == "raw":
                    await self._send_raw(sse, body, slot)
                else:
                    await self._send_aiohttp(sse, body)
            if sse.fail is None:
                sse.finish()
        except TimeoutError:
            sse.fail = ("timeout", f"no complete response within {self.timeout:g} s")
            _drop(slot)
        except asyncio.CancelledError:
            sse.fail = ("exception", "cancelled: the run was stopped")
            _drop(slot)
            raise
        except Exception as exc:  # every other failure is a result, not a crash
            sse.fail = ("exception", f"{type(exc).__name__}: {exc}")
            _drop(slot)
        finally:
            self.inflight -= 1
            sse.close(self.t0, self.api_key)

    async def _send_aiohttp(self, sse: _SSE, body: bytes) -> None:
        assert self.session is not None
        perf = time.perf_counter
        async with self.session.post(self.url, data=body) as resp:
            sse.rec.http_status = resp.status
            if resp.status != 200:
                raw = await resp.content.read(4096)
                sse.http_error(resp.status, resp.reason or "", raw)
                return
            content = resp.content
            feed = sse.feed
            while True:
                data = await content.readany()
                if not data or not feed(data, perf()):
                    return

    async def _send_raw(self, sse: _SSE, body: bytes, slot: list[Any]) -> None:
        """HTTP/1.1 on the worker's own keep-alive socket; see `_RawConnection` for why."""
        request = self._raw_head + str(len(body)).encode() + b"\r\n\r\n" + body
        for attempt in (0, 1):
            conn: _RawConnection | None = slot[0]
            reused = conn is not None and conn.usable
            if not reused:
                _drop(slot)
                conn = await _RawConnection.open(self._raw_target)
                slot[0] = conn
            assert conn is not None
            try:
                await conn.request(request, sse)
            except _StaleConnection:
                _drop(slot)
                if reused and attempt == 0:
                    continue  # the server had closed the idle keep-alive socket: send it again
                raise
            break
        if conn is None or not conn.usable:
            _drop(slot)

    async def _worker(self, phase: _Phase, order: Any) -> None:
        prompts = phase.prompts
        records = phase.records
        slot = self._slots.pop() if self._slots else [None]
        try:
            for i in order:
                if self.stop:
                    return
                rec = RequestRecord(index=i, start=0.0)
                records[i] = rec
                await self._request(rec, prompts[i], slot)
                phase.done += 1
        finally:
            self._slots.append(slot)  # the next phase's workers reuse the warm connections

    async def _run_phase(self, phase: _Phase) -> None:
        order = iter(range(len(phase.prompts)))  # shared: each worker pulls the next index
        workers = min(self.workload.concurrency, len(phase.prompts))
        tasks = [asyncio.create_task(self._worker(phase, order)) for _ in range(workers)]
        try:
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def run(self, prompts: Sequence[str]) -> LoadResult:
        w = self.workload
        _ensure_open_files(w.concurrency + 256)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        connector = aiohttp.TCPConnector(
            limit=w.concurrency, limit_per_host=0, keepalive_timeout=60, ttl_dns_cache=300
        )
        self.session = aiohttp.ClientSession(
            connector=connector,
            headers=headers,
            read_bufsize=READ_BUFSIZE,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )
        try:
            warm = _Phase(prompts[: w.warmups], [None] * w.warmups)
            measured = _Phase(prompts[w.warmups :], [None] * w.num_requests)
            if warm.prompts and not self._cancelled():
                self._phase("warming_up")
                self.t0 = time.perf_counter()
                await self._supervised(warm, [], [], {"gc": 0}, progress=False)
            warm_failed = [r for r in warm.records if r is not None and not r.ok]
            return await self._measure(measured, warm_failed)
        finally:
            for slot in self._slots:
                _drop(slot)
            await self.session.close()

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    async def _measure(self, phase: _Phase, warm_failed: list[RequestRecord]) -> LoadResult:
        total = len(phase.prompts)
        lags: list[float] = []
        timeline: list[tuple[float, int]] = []
        state = {"gc": 0}
        gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()
        gc.disable()
        cancelled = self._cancelled() or self.stop
        if not cancelled:
            self._phase("loading")
        cpu0 = time.process_time()
        thread0 = time.thread_time()
        wall0 = time.time()
        self.t0 = t0 = time.perf_counter()
        try:
            if not cancelled:
                cancelled = await self._supervised(phase, lags, timeline, state, progress=True)
            end = time.perf_counter()
        finally:
            if gc_was_enabled:
                gc.enable()
            gc.unfreeze()
        cpu = time.process_time() - cpu0
        duration = end - t0
        timeline.append((duration, self.inflight))
        self._progress(phase.done, total)
        records = [r for r in phase.records if r is not None]
        lag_ms = sorted(x * 1000.0 for x in lags) or [0.0]
        return LoadResult(
            records=records,
            duration_s=duration,
            started_at_unix=wall0,
            t0_perf_counter=t0,
            concurrency=self.workload.concurrency,
            client_cpu_s=cpu,
            client_cpu_util=cpu / duration if duration > 0 else 0.0,
            loop_cpu_s=time.thread_time() - thread0,
            loop_lag_mean_ms=sum(lag_ms) / len(lag_ms),
            loop_lag_p99_ms=lag_ms[min(len(lag_ms) - 1, int(0.99 * len(lag_ms)))],
            loop_lag_max_ms=lag_ms[-1],
            inflight=timeline,
            warmup_failed=len(warm_failed),
            warmup_errors=[f"{r.error_kind}: {r.error}" for r in warm_failed[:5]],
            gc_collections=state["gc"],
            cancelled=cancelled or self.stop,
        )

    async def _supervised(
        self,
        phase: _Phase,
        lags: list[float],
        timeline: list[tuple[float, int]],
        state: dict[str, int],
        progress: bool,
    ) -> bool:
        """Run a phase beside its monitor; True when it was stopped by `cancel`."""
        main = asyncio.create_task(self._run_phase(phase))
        monitor = asyncio.create_task(self._monitor(main, phase, lags, timeline, state, progress))
        try:
            await main
        except asyncio.CancelledError:
            if not self.stop:
                raise
            return True
        finally:
            monitor.cancel()
            await asyncio.gather(monitor, return_exceptions=True)
        return self.stop

    async def _monitor(
        self,
        main: asyncio.Task[None],
        phase: _Phase,
        lags: list[float],
        timeline: list[tuple[float, int]],
        state: dict[str, int],
        progress: bool,
    ) -> None:
        """Loop lag every 10 ms; in-flight, cancel and progress every 100-250 ms; bounded GC."""
        perf = time.perf_counter
        total = len(phase.prompts)
        tick = 0
        last_done = -1
        while not main.done():
            before = perf()
            await asyncio.sleep(MONITOR_TICK_S)
            now = perf()
            lags.append(max(0.0, now - before - MONITOR_TICK_S))
            tick += 1
            if tick % TIMELINE_EVERY == 0:
                timeline.append((now - self.t0, self.inflight))
                if self._cancelled() and not self.stop:
                    self.stop = True
                    main.cancel()
                if gc.get_count()[0] > GC_YOUNG_LIMIT:
                    gc.collect(1)
                    state["gc"] += 1
            if progress and tick % PROGRESS_EVERY == 0 and phase.done != last_done:
                last_done = phase.done
                self._progress(phase.done, total)

    def _phase(self, name: str) -> None:
        if self.on_phase is None:
            return
        try:
            self.on_phase(name)
        except Exception:  # the caller's bookkeeping must not end a measurement
            self.on_phase = None

    def _progress(self, done: int, total: int) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(done, total)
        except Exception:  # a broken progress bar must not end a measurement
            self.on_progress = None


class _SSE:
    """One response being read: SSE events -> the record's TTFT, ITL, usage and outcome.

    Every read is stamped once (`t`): chunks that arrived together get ITL 0 after the first, which
    is what happened on the wire. Runs of plain content chunks are counted in bulk with C-level
    `bytes.count/find`; the first chunk, usage, [DONE], errors and anything unusual go through
    `_classify` one by one.
    """

    __slots__ = ("rec", "st", "itl", "last", "first", "done", "usage", "fail", "pending")

    def __init__(self, rec: RequestRecord, st: float) -> None:
        self.rec = rec
        self.st = st
        self.itl = rec.itl
        self.last = st
        self.first = True
        self.done = False
        self.usage: dict[str, Any] | None = None
        self.fail: tuple[str, str] | None = None
        self.pending = b""

    def http_error(self, status: int, reason: str, raw: bytes) -> None:
        excerpt = raw.decode("utf-8", "replace").strip()[:ERROR_EXCERPT]
        self.fail = ("http", f"HTTP {status} {reason}: {excerpt}")

    def feed(self, data: bytes, t: float) -> bool:
        """The body bytes of one read, all received at `t`; False when the stream must stop."""
        if self.pending:
            data = self.pending + data
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        cut = data.rfind(_SEP)
        if cut < 0:
            self.pending = data
            return True
        self.pending = data[cut + 2 :] if cut + 2 < len(data) else b""
        itl = self.itl
        first = self.first
        last = self.last
        bulk = not first
        pos = 0
        while pos <= cut:
            if bulk:
                lc = data.rfind(_CONTENT, pos, cut)
                if lc >= 0:
                    le = data.find(_SEP, lc, cut)
                    if le < 0:
                        le = cut
                    n = data.count(_SEP, pos, le) + 1
                    if (
                        data.count(_CONTENT, pos, le) == n
                        and data.find(_ERROR_KEY, pos, le) < 0
                        and data.find(_USAGE, pos, le) < 0
                    ):
                        itl.append(t - last)  # n chunks that arrived together
                        if n > 1:
                            itl.extend(repeat(0.0, n - 1))
                        last = t
                        pos = le + 2
                        continue
                bulk = False  # nothing left to bulk, or a mixed run
            end = data.find(_SEP, pos, cut)
            if end < 0:
                end = cut
            kind, obj = _classify(data[pos:end])
            pos = end + 2
            if kind == "content":
                if first:
                    first = False
                    bulk = True
                    self.rec.ttft = t - self.st
                else:
                    itl.append(t - last)
                last = t
                if obj is not None and obj.get("usage"):
                    self.usage = obj["usage"]
            elif kind == "usage":
                self.usage = obj["usage"] if obj is not None else None
            elif kind == "done":
                self.done = True
            elif kind == "error":
                self.fail = ("stream_error", _error_text(obj))
                self.first, self.last = first, last
                return False
        self.first, self.last = first, last
        return True

    def finish(self) -> None:
        """The body ended: read a last event that had no blank line, then decide the outcome."""
        if self.pending.strip():
            pending, self.pending = self.pending, b""
            if not self.feed(pending + _SEP, time.perf_counter()):
                return
        rec = self.rec
        if self.first:
            self.fail = ("early_end", "the stream ended without any choices chunk")
        elif not self.done:
            self.fail = ("early_end", "the stream ended without [DONE]")
        elif self.usage is None:
            self.fail = (
                "no_usage",
                "the stream had no usage chunk; output tokens unknown "
                "(the lab does not count chunks as tokens)",
            )
        else:
            rec.output_tokens = _int_or_none(self.usage.get("completion_tokens"))
            rec.prompt_tokens = _int_or_none(self.usage.get("prompt_tokens"))
            if rec.output_tokens is None:
                self.fail = ("no_usage", "the usage chunk had no completion_tokens")

    def close(self, t0: float, secret: str | None) -> None:
        """Write the outcome into the record: times relative to t0, the error text scrubbed."""
        rec = self.rec
        if not self.first:
            rec.end = self.last - t0
        if self.fail is None:
            rec.ok = True
        else:
            rec.ok = False
            rec.error_kind = self.fail[0]
            rec.error = _scrub(self.fail[1], secret)[: ERROR_EXCERPT + 100]


# --- the raw HTTP/1.1 transport ------------------------------------------------------------------
# Why: aiohttp runs about six Python calls per HTTP chunk (and vLLM sends one chunk per token), which
# is most of a streaming client's CPU. Here a worker owns one keep-alive socket; a read takes
# everything the socket has, de-chunks it in one loop and hands it to `_SSE` in one call.
# HTTP/1.1 only (chunked, Content-Length or until-close bodies), TLS via asyncio, no proxies.


class _StaleConnection(ConnectionError):
    """A reused keep-alive socket closed before any byte of the response: safe to resend once."""


@dataclass(frozen=True)
class _Target:
    host: str
    port: int
    tls: bool
    path: str
    host_header: str

    @classmethod
    def parse(cls, url: str) -> _Target:
        parts = urllib.parse.urlsplit(url)
        tls = parts.scheme == "https"
        host = parts.hostname or "127.0.0.1"
        port = parts.port or (443 if tls else 80)
        shown = f"[{host}]" if ":" in host else host
        header = shown if port == (443 if tls else 80) else f"{shown}:{port}"
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        return cls(host=host, port=port, tls=tls, path=path, host_header=header)


class _RawConnection(asyncio.Protocol):
    """One keep-alive socket that reads its responses inside `data_received`.

    The event loop calls `data_received` with whatever the socket had; the head is parsed, the
    body de-chunked and handed to the request's `_SSE` right there, stamped with the callback's
    own clock reading. The waiting task is woken once, when the response is complete, instead of
    once per read: on a stream of small token chunks that wake-up is most of a client's cost.
    """

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.sse: _SSE | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.head = b""
        self.body: _Body | None = None
        self.status = 0
        self.reason = ""
        self.error_body = b""
        self.received = False
        self.usable = False

    @classmethod
    async def open(cls, target: _Target) -> _RawConnection:
        loop = asyncio.get_running_loop()
        context = ssl.create_default_context() if target.tls else None
        _, proto = await loop.create_connection(
            cls,
            target.host,
            target.port,
            ssl=context,
            server_hostname=target.host if context is not None else None,
        )
        return proto

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.usable = True
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass

    def request(self, data: bytes, sse: _SSE) -> asyncio.Future[None]:
        """Send one request; the future resolves when its response has been read (or fails)."""
        if not self.usable or self.transport is None or self.transport.is_closing():
            raise _StaleConnection("the connection is closed")
        self.sse = sse
        self.head = b""
        self.body = None
        self.status = 0
        self.error_body = b""
        self.received = False
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter

    def data_received(self, data: bytes) -> None:
        t = time.perf_counter()
        sse = self.sse
        if sse is None:  # bytes nobody asked for: the socket cannot be trusted any more
            self.close()
            return
        self.received = True
        try:
            body = self.body
            if body is None:
                data = self._read_head(data)
                body = self.body
                if body is None:
                    return
            if not data and not body.complete:
                return
            payload = body.feed(data) if data else b""
            if self.status != 200:
                self.error_body += payload
                if body.complete or len(self.error_body) >= 4096:
                    sse.http_error(self.status, self.reason, self.error_body)
                    self._done(keep=False)
                return
            if payload and not sse.feed(payload, t):
                self._done(keep=False)  # stopped mid-stream: the socket is not reusable
            elif body.complete:
                self._done(keep=body.keep_alive and not body.leftover)
        except Exception as exc:  # a malformed response fails this request, not the loop
            self._fail(exc)

    def _read_head(self, data: bytes) -> bytes:
        """Collect the head; once whole, set status and framing and return the body bytes."""
        buf = self.head + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 65536:
                    raise ConnectionError("response head larger than 64 KiB")
                self.head = buf
                return b""
            lines = buf[:end].decode("latin-1").split("\r\n")
            rest = buf[end + 4 :]
            parts = lines[0].split(" ", 2)
            try:
                status = int(parts[1])
            except (IndexError, ValueError):
                raise ConnectionError(f"not an HTTP response: {lines[0][:80]!r}") from None
            if 100 <= status < 200:
                buf = rest  # an interim response; the real one follows
                continue
            headers: dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            self.head = b""
            self.status = status
            self.reason = parts[2] if len(parts) > 2 else ""
            self.body = _Body.of(parts[0], headers)
            assert self.sse is not None
            self.sse.rec.http_status = status
            return rest

    def _done(self, keep: bool) -> None:
        self.sse = None
        if not keep:
            self.close()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self.sse = None
        self.close()
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def eof_received(self) -> bool:
        self._ended(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.usable = False
        self._ended(exc)

    def _ended(self, exc: Exception | None) -> None:
        """The server closed the socket: the end of an until-close body, or a failure."""
        self.usable = False
        if self.sse is None:
            return
        if not self.received:
            self._fail(_StaleConnection("connection closed before the response"))
            return
        body = self.body
        if body is not None and body.mode == "close" and exc is None:
            body.complete = True
            if self.status != 200:
                self.sse.http_error(self.status, self.reason, self.error_body)
            self._done(keep=False)
            return
        self._fail(
            ConnectionError(
                "the connection closed inside the response" + (f": {exc}" if exc else "")
            )
        )

    def close(self) -> None:
        self.usable = False
        self.sse = None
        if self.transport is not None:
            self.transport.close()


class _Body:
    """How a response body ends: chunked, Content-Length, or the server closing the socket."""

    __slots__ = ("mode", "left", "crlf", "trailer", "complete", "buf", "leftover", "keep_alive")

    def __init__(self, mode: str, length: int, keep_alive: bool) -> None:
        self.mode = mode  # "chunked" | "length" | "close"
        self.left = length  # bytes left in the current chunk, or of the whole body
        self.crlf = False  # a chunk's data is done, its CRLF is next
        self.trailer = False  # past the last (zero-size) chunk
        self.complete = mode == "length" and length == 0
        self.buf = b""
        self.leftover = b""
        self.keep_alive = keep_alive and mode != "close"

    @classmethod
    def of(cls, version: str, headers: dict[str, str]) -> _Body:
        connection = headers.get("connection", "").lower()
        keep = version.upper() == "HTTP/1.1" and "close" not in connection
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return cls("chunked", 0, keep)
        if "content-length" in headers:
            try:
                return cls("length", int(headers["content-length"]), keep)
            except ValueError:
                raise ConnectionError("invalid Content-Length") from None
        return cls("close", 0, False)

    def feed(self, data: bytes) -> bytes:
        """Raw bytes in, body bytes out; sets `complete` at the end of the body."""
        if self.mode == "chunked":
            return self._chunked(data)
        if self.mode == "length":
            if len(data) >= self.left:
                body, self.leftover = data[: self.left], data[self.left :]
                self.left = 0
                self.complete = True
                return body
            self.left -= len(data)
            return data
        return data

    def _chunked(self, data: bytes) -> bytes:
        if self.buf:
            data = self.buf + data
            self.buf = b""
        if not (self.left or self.crlf or self.trailer) and data.endswith(b"\r\n"):
            # Fast path: the read is whole chunks. Split on CRLF and check every declared size
            # against its piece: a payload holding a CRLF can never pass (its own declared size
            # is longer than the piece before the CRLF), so a pass is a correct parse.
            parts = data.split(b"\r\n")
            if len(parts) % 2:
                pieces = parts[1:-1:2]
                try:
                    sizes = [int(h, 16) for h in parts[0:-1:2]]
                except ValueError:
                    sizes = []
                if sizes and 0 not in sizes and sizes == list(map(len, pieces)):
                    return pieces[0] if len(pieces) == 1 else b"".join(pieces)
        out: list[bytes] = []
        pos = 0
        n = len(data)
        while pos < n:
            left = self.left
            if left:
                if n - pos >= left:
                    out.append(data[pos : pos + left])
                    pos += left
                    self.left = 0
                    self.crlf = True
                else:
                    out.append(data[pos:])
                    self.left = left - (n - pos)
                    pos = n
                continue
            if self.crlf:
                if n - pos < 2:
                    self.buf = data[pos:]
                    break
                if not data.startswith(b"\r\n", pos):
                    raise ConnectionError("malformed chunked body (no CRLF after a chunk)")
                pos += 2
                self.crlf = False
                continue
            eol = data.find(b"\r\n", pos)
            if eol < 0:
                self.buf = data[pos:]
                if len(self.buf) > 4096:
                    raise ConnectionError("malformed chunked body (chunk header too long)")
                break
            if self.trailer:
                if eol == pos:  # the blank line that ends the trailers: the body is done
                    self.complete = True
                    self.leftover = data[pos + 2 :]
                    break
                pos = eol + 2
                continue
            try:
                size = int(data[pos:eol], 16)
            except ValueError:
                try:
                    size = int(data[pos:eol].split(b";", 1)[0], 16)  # chunk extensions
                except ValueError:
                    raise ConnectionError("malformed chunk size") from None
            pos = eol + 2
            if size == 0:
                self.trailer = True
                continue
            if pos + size + 2 <= n and data.startswith(b"\r\n", pos + size):
                out.append(data[pos : pos + size])  # the common case: a whole chunk
                pos += size + 2
                continue
            self.left = size
        if len(out) == 1:
            return out[0]
        return b"".join(out)


def _drop(slot: list[Any]) -> None:
    """Close and forget a worker's raw connection (after an error, a close, or the run)."""
    conn = slot[0]
    if conn is not None:
        conn.close()
        slot[0] = None


def _ensure_open_files(need: int) -> None:
    """C sockets need C file descriptors: lift the soft limit toward the hard one if it is lower."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < need:
            target = need if hard == resource.RLIM_INFINITY else min(need, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ImportError, ValueError, OSError):
        pass


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _classify(event: bytes) -> tuple[str, dict[str, Any] | None]:
    """One SSE event -> (kind, parsed JSON or None). Kinds: content, usage, done, error, skip.

    Content chunks are recognised without parsing when they look like vLLM's compact JSON; anything
    else (spaced JSON, usage, errors, unknown events) is parsed so nothing is misread.
    """
    event = event.strip()
    if not event or event.startswith(b":"):
        return "skip", None
    if event.startswith(b"data:") and b"\n" not in event:
        payload = event[5:].strip()
    else:
        lines = [line[5:].strip() for line in event.split(b"\n") if line.startswith(b"data:")]
        if not lines:
            return "skip", None
        payload = b"\n".join(lines)
    if payload == _DONE:
        return "done", None
    if _CONTENT in payload and _ERROR_KEY not in payload and _USAGE not in payload:
        return "content", None
    try:
        obj = json.loads(payload)
    except ValueError:
        return "error", {
            "error": {
                "message": "unparseable stream event: " + payload[:200].decode("utf-8", "replace")
            }
        }
    if not isinstance(obj, dict):
        return "error", {"error": {"message": f"unexpected stream event: {str(obj)[:200]}"}}
    if "error" in obj or obj.get("object") == "error":
        return "error", obj
    if obj.get("choices"):
        return "content", obj
    if obj.get("usage"):
        return "usage", obj
    return "skip", None


def _error_text(obj: dict[str, Any] | None) -> str:
    if not obj:
        return "error event in the stream"
    err = obj.get("error", obj)
    if isinstance(err, dict):
        msg = err.get("message") or json.dumps(err)[:ERROR_EXCERPT]
        code = err.get("code") or err.get("type")
        return f"error event in the stream: {msg}" + (f" ({code})" if code else "")
    return f"error event in the stream: {err}"


def _check_prompts(prompts: Sequence[str], workload: Workload) -> None:
    if len(prompts) != workload.total_prompts:
        raise LoadError(
            f"got {len(prompts)} prompts, the workload needs {workload.total_prompts} "
            f"({workload.warmups} warm-ups + {workload.num_requests} measured)"
        )


async def run_load(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    workload: Workload,
    *,
    api_key: str | None = None,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    on_phase: PhaseCallback | None = None,
    transport: str = DEFAULT_TRANSPORT,
) -> LoadResult:
    """Warm up, then send `workload.num_requests` measured requests keeping C in flight.

    `prompts` is `build_prompts(workload, ...)`: warm-ups first. `api_key` defaults to
    OPENAI_API_KEY. `on_progress(done, total)` is called about every 250 ms and at the end, from the
    event loop's thread; `on_phase` gets "warming_up" (only when there are warm-ups) and "loading"
    (just before the first measured dispatch). `transport` is "aiohttp" or "raw" (see
    TRANSPORTS). Setting `cancel` stops dispatching and cancels in-flight requests (recorded
    as failed, `cancelled: ...`); the result then has `cancelled=True`.
    """
    _check_prompts(prompts, workload)
    key = api_key if api_key is not None else api_key_from_env()
    client = _Client(base_url, model, workload, key, on_progress, cancel, on_phase, transport)
    return await client.run(prompts)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def run_load_sync(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    workload: Workload,
    *,
    api_key: str | None = None,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    on_phase: PhaseCallback | None = None,
    transport: str = DEFAULT_TRANSPORT,
) -> LoadResult:
    """`run_load` in a fresh event loop (uvloop when installed), for plain threads and processes."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(
            run_load(
                base_url,
                model,
                prompts,
                workload,
                api_key=api_key,
                on_progress=on_progress,
                cancel=cancel,
                on_phase=on_phase,
                transport=transport,
            )
        )


# --- the load generator in its own process -------------------------------------------------------
# Frames on the child's stdout: 1 byte kind + 8 bytes length + payload. P = progress (two int64),
# S = phase name, R = pickled LoadResult, E = error text. The job (and the key, if given) goes in
# on stdin: never argv.
_FRAME = struct.Struct("<cQ")
_PROGRESS = struct.Struct("<qq")
from tuning.settings import REPO_ROOT as _REPO_ROOT  # noqa: E402


def run_load_in_subprocess(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    workload: Workload,
    *,
    api_key: str | None = None,
    on_progress: Progress | None = None,
    cancel: threading.Event | None = None,
    on_phase: PhaseCallback | None = None,
    transport: str = DEFAULT_TRANSPORT,
    python: str | None = None,
) -> LoadResult:
    """`run_load_sync` in a child Python process, so the client has a core's worth of GIL to itself
    while telemetry threads run in the caller. Cancelling sends SIGTERM (a graceful stop)."""
    _check_prompts(prompts, workload)
    job = {
        "base_url": base_url,
        "model": model,
        "prompts": list(prompts),
        "workload": workload.to_dict(),
        "api_key": api_key,
        "transport": transport,
    }
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [python or sys.executable, "-m", "tuning.loadgen.client", "--child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=str(_REPO_ROOT),
            start_new_session=True,
        )
        assert proc.stdin is not None and proc.stdout is not None
        stop_watch = threading.Event()

        def watch() -> None:
            while not stop_watch.is_set() and proc.poll() is None:
                if cancel is not None and cancel.wait(0.1):
                    proc.send_signal(signal.SIGTERM)
                    return
                if cancel is None:
                    stop_watch.wait(0.1)

        watcher = threading.Thread(target=watch, name="loadgen-cancel", daemon=True)
        watcher.start()
        result: LoadResult | None = None
        failure: str | None = None
        try:
            try:
                proc.stdin.write(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            while True:
                head = proc.stdout.read(_FRAME.size)
                if len(head) < _FRAME.size:
                    break
                kind, size = _FRAME.unpack(head)
                payload = proc.stdout.read(size)
                if kind == b"P" and on_progress is not None:
                    on_progress(*_PROGRESS.unpack(payload))
                elif kind == b"S" and on_phase is not None:
                    on_phase(payload.decode())
                elif kind == b"R":
                    result = pickle.loads(payload)
                elif kind == b"E":
                    failure = payload.decode("utf-8", "replace")
            proc.wait(timeout=30)
        finally:
            stop_watch.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            watcher.join(timeout=1)
        if result is not None:
            return result
        err.seek(0)
        tail = err.read()[-2000:].decode("utf-8", "replace")
        raise LoadError(
            failure
            or f"the load generator process exited with {proc.returncode}: {_scrub(tail, api_key)}"
        )


def _child_main() -> int:
    """Entry of `python -m tuning.loadgen.client --child`: job on stdin, frames on stdout."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints go to stderr, never into the frame stream
    job = pickle.loads(sys.stdin.buffer.read())
    cancel = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancel.set())
    parent = os.getppid()

    def orphan_watch() -> None:
        while not cancel.wait(0.5):
            if os.getppid() != parent:
                cancel.set()

    threading.Thread(target=orphan_watch, name="orphan-watch", daemon=True).start()

    def send(kind: bytes, payload: bytes) -> None:
        out.write(_FRAME.pack(kind, len(payload)) + payload)

    try:
        result = run_load_sync(
            job["base_url"],
            job["model"],
            job["prompts"],
            Workload.from_dict(job["workload"]),
            api_key=job["api_key"],
            on_progress=lambda d, t: send(b"P", _PROGRESS.pack(d, t)),
            cancel=cancel,
            on_phase=lambda ph: send(b"S", ph.encode()),
            transport=job.get("transport", DEFAULT_TRANSPORT),
        )
    except Exception as exc:
        send(b"E", _scrub(f"{type(exc).__name__}: {exc}", job.get("api_key")).encode())
        return 1
    send(b"R", pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        # Run the imported module's copy, not __main__'s, so the pickled result names
        # tuning.loadgen.client.LoadResult, which the parent can load.
        from tuning.loadgen.client import _child_main as child_main

        sys.exit(child_main())
    print("internal entry point: use tuning.loadgen.client.run_load_in_subprocess", file=sys.stderr)
    sys.exit(2)
