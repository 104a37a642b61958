"""The closed-loop streaming client: exactly C requests in flight, one `RequestRecord` per request.

Why it is built this way:
- Closed loop with C workers pulling from one shared iterator (not N tasks behind a semaphore): a
  request is dispatched the moment a slot frees, no task waits on a lock, and the client's own
  queueing never hides inside a latency.
- Two transports behind one SSE reader (`sse.py`). "aiohttp": one ClientSession, a pool of
  exactly C keep-alive sockets, a large read buffer (vllm#39963). "raw" (`http1.py`): the lab's own
  HTTP/1.1 reader, one keep-alive socket per worker, parsing inside the socket callback; it spends
  about 1.1-1.5x less CPU per token, because aiohttp runs several Python calls per HTTP chunk and
  vLLM sends one chunk per token (benchmarks/client_capacity.py measures both against vLLM's
  client).
- uvloop when present; the GC heap frozen and automatic GC off while measuring (process-wide: a
  young-generation collection runs from the monitor task only when garbage piles up).
- A stream silent for `stall_timeout_s` after its first token, or with only SSE comments (keep-
  alives) that long since it was sent, fails `stalled` (before any byte a request may be queued:
  only the request timeout ends it). No per-chunk work: the monitor sweeps the in-flight streams
  every 0.5 s, reading the times the SSE reader keeps, and fires a stalled request's own timeout.
- Failures are counted, never dropped: every dispatched measured request yields a record, `ok=False`
  with an `error_kind` from `core.records.FAILURE_KINDS` when it failed.
- The API key comes from OPENAI_API_KEY (or an explicit argument); it is sent as a Bearer header and
  scrubbed from every error text the lab stores (`endpoint.py`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from core.records import RequestRecord
from tuning.measure.loadgen import http1
from tuning.measure.loadgen.result import LoadError as LoadError
from tuning.measure.loadgen.result import LoadOptions as LoadOptions
from tuning.measure.loadgen.result import LoadResult as LoadResult
from tuning.measure.loadgen.result import PhaseCallback, Progress
from tuning.measure.loadgen.sse import SSEReader
from tuning.measure.telemetry.server_stats import (
    MetricsReader,
    Settled,
    read_settled,
    tokens_counted,
)
from tuning.measure.traffic.workload import Workload, server_root

TRANSPORTS: tuple[str, ...] = ("auto", "aiohttp", "raw")
# aiohttp: the reference design (one ClientSession, a pool of C keep-alive sockets). raw: the lab's
# own HTTP/1.1 reader, about 1.1-1.5x less client CPU per token (benchmarks/client_capacity.py).
DEFAULT_TRANSPORT = "auto"
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}

READ_BUFSIZE = 10 * 2**20  # bytes; aiohttp's 64 KiB default throttles long contexts (vllm#39963)
MONITOR_TICK_S = 0.010  # the loop-lag probe's sleep
TIMELINE_EVERY = 10  # ticks between in-flight samples (about 100 ms)
PROGRESS_EVERY = 25  # ticks between progress callbacks (about 250 ms)
GC_YOUNG_LIMIT = 200_000  # young objects before the monitor runs a gen-0/1 collection
STALL_SWEEP_EVERY = 50  # ticks between sweeps for stalled streams (about 500 ms)


def resolve_transport(transport: str, base_url: str) -> str:
    """ "auto": the lean raw reader for a plain-HTTP loopback server (every engine the lab starts),
    aiohttp for anything else (proxies, remote gateways, TLS)."""
    if transport != "auto":
        return transport
    parts = urllib.parse.urlsplit(base_url if "://" in base_url else "http://" + base_url)
    return "raw" if parts.scheme == "http" and parts.hostname in _LOOPBACK else "aiohttp"


@dataclass
class _Phase:
    prompts: Sequence[str]
    records: list[RequestRecord | None]
    done: int = 0


@dataclass
class _Watch:
    """What the monitor records beside a running phase."""

    progress: bool  # call on_progress (the measured phase only)
    lags: list[float] = field(default_factory=list)  # event-loop lag per tick, seconds
    timeline: list[tuple[float, int]] = field(default_factory=list)  # (t, requests in flight)
    gc_collections: int = 0


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
        server_stats: bool = False,
    ) -> None:
        if transport not in TRANSPORTS:
            raise LoadError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
        root = server_root(base_url)
        self.transport = resolve_transport(transport, root)
        self._metrics = MetricsReader(root) if server_stats else None
        self._slots: list[http1.Slot] = []
        self.workload = workload
        self.url = root + (
            "/v1/chat/completions" if workload.endpoint == "chat" else "/v1/completions"
        )
        self.api_key = api_key
        self.on_progress = on_progress
        self.on_phase = on_phase
        self.cancel = cancel
        self.timeout = workload.request_timeout_s
        self.stall_timeout = workload.stall_timeout_s
        # In-flight streams and their request timeouts, for the monitor's stall sweep.
        self._streams: dict[SSEReader, asyncio.Timeout] = {}
        self.stop = False
        self._measured: list[RequestRecord] = []
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
        self._raw_target = http1.Target.parse(self.url)
        self._raw_head = self._raw_target.post_head(api_key)

    def _body(self, prompt: str) -> bytes:
        return self._body_head + json.dumps(prompt).encode() + self._body_tail

    def _reader(self, rec: RequestRecord, st: float, size: int) -> SSEReader:
        """The SSE reader of one request of `size` bytes (a subclass may keep more of it)."""
        return SSEReader(rec, st, (self.workload.output_len, size))

    async def _request(
        self, rec: RequestRecord, prompt: str | bytes, slot: http1.Slot
    ) -> SSEReader:
        """Send one streaming request and fill `rec`; never raises except on cancellation.

        `prompt` is a prompt text, or a whole request body already encoded. `slot` is the worker's
        own state: the raw transport keeps its keep-alive connection there.
        """
        body = prompt if isinstance(prompt, bytes) else self._body(prompt)
        st = time.perf_counter()
        rec.start = st - self.t0
        self.inflight += 1
        sse = self._reader(rec, st, len(body))
        try:
            async with asyncio.timeout(self.timeout) as deadline:
                self._streams[sse] = deadline
                if self.transport == "raw":
                    request = self._raw_head + str(len(body)).encode() + b"\r\n\r\n" + body
                    await http1.send(slot, self._raw_target, request, sse)
                else:
                    await self._send_aiohttp(sse, body)
            if sse.fail is None:
                sse.finish()
        except TimeoutError:
            if not _stalled(sse):  # a stall fires the same timeout early (_sweep_stalls)
                sse.fail = ("timeout", f"no complete response within {self.timeout:g} s")
            http1.drop(slot)
        except asyncio.CancelledError:
            sse.fail = ("exception", "cancelled: the run was stopped")
            http1.drop(slot)
            raise
        except Exception as exc:  # every other failure is a result, not a crash
            if not _stalled(sse):
                sse.fail = ("exception", f"{type(exc).__name__}: {exc}")
            http1.drop(slot)
        finally:
            self._streams.pop(sse, None)
            self.inflight -= 1
            sse.close(self.t0, self.api_key)
        return sse

    async def _send_aiohttp(self, sse: SSEReader, body: bytes) -> None:
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

    async def _worker(self, phase: _Phase, order: Any) -> None:
        prompts = phase.prompts
        records = phase.records
        slot: http1.Slot = self._slots.pop() if self._slots else [None]
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
            await self._cancel_all(tasks)
            raise

    @staticmethod
    async def _cancel_all(tasks: list[asyncio.Task[None]]) -> None:
        """Cancel a phase's tasks (those started so far) and wait until every one has ended."""
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

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
            # read before the warm-ups too: `before` then waits until their tokens are counted
            pre = await self._server_read() if warm.prompts else None
            if warm.prompts and not self._cancelled():
                self._phase("warming_up")
                self.t0 = time.perf_counter()
                await self._supervised(warm, _Watch(progress=False))
            warm_failed = [r for r in warm.records if r is not None and not r.ok]
            before = await self._server_read(pre, warm.records)  # none in flight
            return await self._measure(measured, warm_failed, before)
        finally:
            for slot in self._slots:
                http1.drop(slot)
            await self.session.close()

    def _cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    async def _server_read(
        self, since: Settled | None = None, records: Sequence[RequestRecord | None] = ()
    ) -> Settled | None:
        """vLLM's counters once settled (server_stats.read_settled), in a thread: until they stop
        moving or, given `since` (the read made before `records` were sent), until the tokens the
        client received for them are all counted. None when not asked for or after a cancel."""
        if self._metrics is None or self._cancelled() or self.stop:
            return None
        target = None
        if since is not None and since.values is not None:
            ok = [r for r in records if r is not None and r.ok]
            tokens = sum(r.output_tokens or 0 for r in ok)
            target = tokens_counted(since.values, tokens, len(ok))
        return await asyncio.to_thread(read_settled, self._metrics, target)

    async def _measure(
        self, phase: _Phase, warm_failed: list[RequestRecord], before: Settled | None
    ) -> LoadResult:
        total = len(phase.prompts)
        watch = _Watch(progress=True)
        gc_was_enabled = gc.isenabled()
        gc.collect()
        gc.freeze()
        gc.disable()
        cancelled = self._cancelled() or self.stop
        if not cancelled:
            self._phase("loading")
        cpu0 = time.process_time()
        thread0 = time.thread_time()
        wall0, mono0 = time.time(), time.monotonic()
        self.t0 = t0 = time.perf_counter()
        try:
            if not cancelled:
                cancelled = await self._supervised(phase, watch)
            end = time.perf_counter()
        finally:
            if gc_was_enabled:
                gc.enable()
            gc.unfreeze()
        cpu = time.process_time() - cpu0
        duration = end - t0
        watch.timeline.append((duration, self.inflight))
        self._progress(phase.done, total)
        records = self._measured = [r for r in phase.records if r is not None]
        counted = before is not None and before.values is not None
        after = await self._server_read(before, self._measured) if counted else None
        lag_ms = sorted(x * 1000.0 for x in watch.lags) or [0.0]
        return LoadResult(
            records=records,
            duration_s=duration,
            started_at_unix=wall0,
            started_monotonic=mono0,
            t0_perf_counter=t0,
            concurrency=self.workload.concurrency,
            client_cpu_s=cpu,
            client_cpu_util=cpu / duration if duration > 0 else 0.0,
            loop_cpu_s=time.thread_time() - thread0,
            loop_lag_mean_ms=sum(lag_ms) / len(lag_ms),
            loop_lag_p99_ms=lag_ms[min(len(lag_ms) - 1, int(0.99 * len(lag_ms)))],
            loop_lag_max_ms=lag_ms[-1],
            inflight=watch.timeline,
            warmup_failed=len(warm_failed),
            warmup_errors=[f"{r.error_kind}: {r.error}" for r in warm_failed[:5]],
            gc_collections=watch.gc_collections,
            cancelled=cancelled or self.stop,
            server_before=before.values if before is not None else None,
            server_after=after.values if after is not None else None,
            server_reads={
                name: read.facts()
                for name, read in (("before", before), ("after", after))
                if read is not None
            },
        )

    async def _supervised(self, phase: _Phase, watch: _Watch) -> bool:
        """Run a phase beside its monitor; True when it was stopped by `cancel`."""
        main = asyncio.create_task(self._run_phase(phase))
        monitor = asyncio.create_task(self._monitor(main, phase, watch))
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

    async def _monitor(self, main: asyncio.Task[None], phase: _Phase, watch: _Watch) -> None:
        """Loop lag every 10 ms; in-flight, cancel and progress every 100-250 ms; bounded GC."""
        perf = time.perf_counter
        lags = watch.lags
        timeline = watch.timeline
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
                    watch.gc_collections += 1
            if tick % STALL_SWEEP_EVERY == 0 and self._streams:
                self._sweep_stalls(now)
            if watch.progress and tick % PROGRESS_EVERY == 0 and phase.done != last_done:
                last_done = phase.done
                self._progress(phase.done, total)

    def _sweep_stalls(self, now: float) -> None:
        """Fail every stream without data for the stall timeout (since its last chunk, or since
        it was sent if it sent only comments): mark it `stalled` and fire its request timeout
        now, which ends it the way a timeout does (raw socket dropped, aiohttp's released)."""
        limit = self.stall_timeout
        loop_now = asyncio.get_running_loop().time()
        for sse, deadline in list(self._streams.items()):
            if (not sse.first or sse.kept_alive) and sse.fail is None and now - sse.last > limit:
                sse.stalled(limit)
                try:
                    deadline.reschedule(loop_now)
                except RuntimeError:  # already leaving its timeout block
                    pass

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


def _stalled(sse: SSEReader) -> bool:
    return sse.fail is not None and sse.fail[0] == "stalled"


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
