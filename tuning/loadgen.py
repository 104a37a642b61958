"""The closed-loop streaming client: exactly C requests in flight, one `RequestRecord` per request.

Why it is built this way:
- Closed loop with C workers pulling from one shared iterator (not N tasks behind a semaphore): a
  request is dispatched the moment a slot frees, no task waits on a lock, and the client's own
  queueing never hides inside a latency.
- One aiohttp session, a connection pool of exactly C keep-alive sockets, a large read buffer
  (vllm#39963), uvloop when present, the GC heap frozen and automatic GC off while measuring.
- The SSE hot path works on bytes: a read that holds only content chunks is handled with a few C-level
  `bytes.count/find` calls, with no JSON parsing and no per-chunk objects beyond the ITL floats the
  record keeps. Only the first content chunk, the usage chunk, errors and anything unusual are parsed.
- Failures are counted, never dropped: every measured request yields a record, `ok=False` with an
  `error_kind` from `tuning.records.FAILURE_KINDS` when it failed.
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
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Sequence

import aiohttp

from .records import RequestRecord
from .workload import Workload, WorkloadError, server_root

Progress = Callable[[int, int], None]

READ_BUFSIZE = 10 * 2**20        # bytes; aiohttp's 64 KiB default throttles long contexts (vllm#39963)
MONITOR_TICK_S = 0.010            # the loop-lag probe's sleep
TIMELINE_EVERY = 10               # ticks between in-flight samples (about 100 ms)
PROGRESS_EVERY = 25               # ticks between progress callbacks (about 250 ms)
GC_YOUNG_LIMIT = 200_000          # young objects before the monitor runs a gen-0/1 collection
ERROR_EXCERPT = 300               # characters of a server's error body kept in a record

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


def check_endpoint(base_url: str, model: str, api_key: str | None = None,
                   timeout_s: float = 10.0) -> list[str]:
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
            raise EndpointError(f"{shown}/v1/models answered HTTP {exc.code}: {what}; "
                                "check OPENAI_API_KEY") from None
        if exc.code == 404:
            raise EndpointError(f"{shown}/v1/models answered HTTP 404: this is not an "
                                "OpenAI-compatible server root; check the base URL") from None
        raise EndpointError(f"{shown}/v1/models answered HTTP {exc.code}; check the base URL "
                            "and that the server is healthy") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer in {timeout_s:g} s"
        else:
            why = _scrub(str(reason), key)
        raise EndpointError(f"cannot reach {shown} ({why}); check the base URL and that the "
                            "server is running") from None
    try:
        data = json.loads(body)
        served = [str(item["id"]) for item in data["data"]]
    except (ValueError, KeyError, TypeError):
        raise EndpointError(f"{shown}/v1/models did not answer a model list; check the base "
                            "URL") from None
    if model not in served:
        raise EndpointError(f"model {model!r} is not served at {shown}; check the model name "
                            f"(served: {', '.join(served) or 'none'})")
    return served


@dataclass
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

    def __init__(self, base_url: str, model: str, workload: Workload, api_key: str | None,
                 on_progress: Progress | None, cancel: threading.Event | None) -> None:
        root = server_root(base_url)
        self.workload = workload
        self.url = root + ("/v1/chat/completions" if workload.endpoint == "chat"
                           else "/v1/completions")
        self.api_key = api_key
        self.on_progress = on_progress
        self.cancel = cancel
        self.timeout = workload.request_timeout_s
        self.stop = False
        self.inflight = 0
        self.t0 = 0.0
        head = {"model": model, "max_tokens": workload.output_len, "temperature": 0.0,
                "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
        open_ = json.dumps(head, separators=(",", ":"))[:-1].encode()
        if workload.endpoint == "chat":
            self._body_head = open_ + b',"messages":[{"role":"user","content":'
            self._body_tail = b"}]}"
        else:
            self._body_head = open_ + b',"prompt":'
            self._body_tail = b"}"
        self.session: aiohttp.ClientSession | None = None

    def _body(self, prompt: str) -> bytes:
        return self._body_head + json.dumps(prompt).encode() + self._body_tail

    async def _request(self, rec: RequestRecord, prompt: str) -> None:
        """Send one streaming request and fill `rec`; never raises except on cancellation."""
        assert self.session is not None
        body = self._body(prompt)
        perf = time.perf_counter
        st = perf()
        rec.start = st - self.t0
        self.inflight += 1
        itl = rec.itl
        append = itl.append
        last = st
        first = True
        done = False
        usage: dict[str, Any] | None = None
        fail: tuple[str, str] | None = None
        try:
            async with asyncio.timeout(self.timeout):
                async with self.session.post(self.url, data=body) as resp:
                    rec.http_status = resp.status
                    if resp.status != 200:
                        raw = await resp.content.read(4096)
                        excerpt = raw.decode("utf-8", "replace").strip()[:ERROR_EXCERPT]
                        fail = ("http", f"HTTP {resp.status} {resp.reason or ''}: {excerpt}")
                        return
                    content = resp.content
                    pending = b""
                    while True:
                        data = await content.readany()
                        if not data:
                            break
                        t = perf()
                        if pending:
                            data = pending + data
                        if b"\r" in data:
                            data = data.replace(b"\r\n", b"\n")
                        cut = data.rfind(_SEP)
                        if cut < 0:
                            pending = data
                            continue
                        pending = data[cut + 2:] if cut + 2 < len(data) else b""
                        n = data.count(_SEP, 0, cut) + 1
                        if (not first and data.count(_CONTENT, 0, cut) == n
                                and data.find(_ERROR_KEY, 0, cut) < 0
                                and data.find(_USAGE, 0, cut) < 0):
                            # Fast path: n content chunks and nothing else, arrived together.
                            append(t - last)
                            if n > 1:
                                itl.extend(repeat(0.0, n - 1))
                            last = t
                            continue
                        for event in data[:cut].split(_SEP):
                            kind, obj = _classify(event)
                            if kind == "content":
                                if first:
                                    first = False
                                    rec.ttft = t - st
                                else:
                                    append(t - last)
                                last = t
                                if obj is not None and obj.get("usage"):
                                    usage = obj["usage"]
                            elif kind == "usage":
                                usage = obj["usage"] if obj is not None else None
                            elif kind == "done":
                                done = True
                            elif kind == "error":
                                fail = ("stream_error", _error_text(obj))
                                return
                    if pending.strip():
                        kind, obj = _classify(pending)
                        if kind == "done":
                            done = True
                        elif kind == "usage" and obj is not None:
                            usage = obj["usage"]
                        elif kind == "error":
                            fail = ("stream_error", _error_text(obj))
                            return
                        elif kind == "content":
                            t = perf()
                            if first:
                                first = False
                                rec.ttft = t - st
                            else:
                                append(t - last)
                            last = t
            if first:
                fail = ("early_end", "the stream ended without any choices chunk")
            elif not done:
                fail = ("early_end", "the stream ended without [DONE]")
            elif usage is None:
                fail = ("no_usage", "the stream had no usage chunk; output tokens unknown "
                                    "(the lab does not count chunks as tokens)")
            else:
                rec.output_tokens = _int_or_none(usage.get("completion_tokens"))
                rec.prompt_tokens = _int_or_none(usage.get("prompt_tokens"))
                if rec.output_tokens is None:
                    fail = ("no_usage", "the usage chunk had no completion_tokens")
        except TimeoutError:
            fail = ("timeout", f"no complete response within {self.timeout:g} s")
        except asyncio.CancelledError:
            fail = ("exception", "cancelled: the run was stopped")
            raise
        except Exception as exc:  # every other failure is a result, not a crash
            fail = ("exception", f"{type(exc).__name__}: {exc}")
        finally:
            self.inflight -= 1
            if not first:
                rec.end = last - self.t0
            if fail is None:
                rec.ok = True
            else:
                rec.ok = False
                rec.error_kind = fail[0]
                rec.error = _scrub(fail[1], self.api_key)[:ERROR_EXCERPT + 100]

    async def _worker(self, phase: _Phase, order: Any) -> None:
        prompts = phase.prompts
        records = phase.records
        for i in order:
            if self.stop:
                return
            rec = RequestRecord(index=i, start=0.0)
            records[i] = rec
            await self._request(rec, prompts[i])
            phase.done += 1

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
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        connector = aiohttp.TCPConnector(limit=w.concurrency, limit_per_host=0,
                                         keepalive_timeout=60, ttl_dns_cache=300)
        self.session = aiohttp.ClientSession(
            connector=connector, headers=headers, read_bufsize=READ_BUFSIZE,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30))
        try:
            warm = _Phase(prompts[:w.warmups], [None] * w.warmups)
            measured = _Phase(prompts[w.warmups:], [None] * w.num_requests)
            if warm.prompts and not self._cancelled():
                self.t0 = time.perf_counter()
                await self._supervised(warm, [], [], {"gc": 0}, progress=False)
            warm_failed = [r for r in warm.records if r is not None and not r.ok]
            return await self._measure(measured, warm_failed)
        finally:
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
            records=records, duration_s=duration, started_at_unix=wall0, t0_perf_counter=t0,
            concurrency=self.workload.concurrency, client_cpu_s=cpu,
            client_cpu_util=cpu / duration if duration > 0 else 0.0,
            loop_cpu_s=time.thread_time() - thread0,
            loop_lag_mean_ms=sum(lag_ms) / len(lag_ms),
            loop_lag_p99_ms=lag_ms[min(len(lag_ms) - 1, int(0.99 * len(lag_ms)))],
            loop_lag_max_ms=lag_ms[-1], inflight=timeline, warmup_failed=len(warm_failed),
            warmup_errors=[f"{r.error_kind}: {r.error}" for r in warm_failed[:5]],
            gc_collections=state["gc"], cancelled=cancelled or self.stop)

    async def _supervised(self, phase: _Phase, lags: list[float],
                          timeline: list[tuple[float, int]], state: dict[str, int],
                          progress: bool) -> bool:
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

    async def _monitor(self, main: "asyncio.Task[None]", phase: _Phase, lags: list[float],
                       timeline: list[tuple[float, int]], state: dict[str, int],
                       progress: bool) -> None:
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

    def _progress(self, done: int, total: int) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(done, total)
        except Exception:  # a broken progress bar must not end a measurement
            self.on_progress = None


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
        return "error", {"error": {"message": "unparseable stream event: "
                                              + payload[:200].decode("utf-8", "replace")}}
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
        raise LoadError(f"got {len(prompts)} prompts, the workload needs {workload.total_prompts} "
                        f"({workload.warmups} warm-ups + {workload.num_requests} measured)")


async def run_load(base_url: str, model: str, prompts: Sequence[str], workload: Workload, *,
                   api_key: str | None = None, on_progress: Progress | None = None,
                   cancel: threading.Event | None = None) -> LoadResult:
    """Warm up, then send `workload.num_requests` measured requests keeping C in flight.

    `prompts` is `build_prompts(workload, ...)`: warm-ups first. `api_key` defaults to
    OPENAI_API_KEY. `on_progress(done, total)` is called about every 250 ms and at the end, from the
    event loop's thread. Setting `cancel` stops dispatching and cancels in-flight requests (recorded
    as failed, `cancelled: ...`); the result then has `cancelled=True`.
    """
    _check_prompts(prompts, workload)
    key = api_key if api_key is not None else api_key_from_env()
    client = _Client(base_url, model, workload, key, on_progress, cancel)
    return await client.run(prompts)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop  # type: ignore[no-any-return]


def run_load_sync(base_url: str, model: str, prompts: Sequence[str], workload: Workload, *,
                  api_key: str | None = None, on_progress: Progress | None = None,
                  cancel: threading.Event | None = None) -> LoadResult:
    """`run_load` in a fresh event loop (uvloop when installed), for plain threads and processes."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(run_load(base_url, model, prompts, workload, api_key=api_key,
                                   on_progress=on_progress, cancel=cancel))


# --- the load generator in its own process -------------------------------------------------------
# Frames on the child's stdout: 1 byte kind + 8 bytes length + payload. P = progress (two int64),
# R = pickled LoadResult, E = error text. The job (and the key, if given) goes in on stdin: never argv.
_FRAME = struct.Struct("<cQ")
_PROGRESS = struct.Struct("<qq")
_REPO_ROOT = Path(__file__).resolve().parents[1]


def run_load_in_subprocess(base_url: str, model: str, prompts: Sequence[str], workload: Workload,
                           *, api_key: str | None = None, on_progress: Progress | None = None,
                           cancel: threading.Event | None = None,
                           python: str | None = None) -> LoadResult:
    """`run_load_sync` in a child Python process, so the client has a core's worth of GIL to itself
    while telemetry threads run in the caller. Cancelling sends SIGTERM (a graceful stop)."""
    _check_prompts(prompts, workload)
    job = {"base_url": base_url, "model": model, "prompts": list(prompts),
           "workload": workload.to_dict(), "api_key": api_key}
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([python or sys.executable, "-m", "tuning.loadgen", "--child"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                cwd=str(_REPO_ROOT), start_new_session=True)
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
        raise LoadError(failure or f"the load generator process exited with {proc.returncode}: "
                                   f"{_scrub(tail, api_key)}")


def _child_main() -> int:
    """Entry of `python -m tuning.loadgen --child`: job on stdin, frames on stdout."""
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
        result = run_load_sync(job["base_url"], job["model"], job["prompts"],
                               Workload.from_dict(job["workload"]), api_key=job["api_key"],
                               on_progress=lambda d, t: send(b"P", _PROGRESS.pack(d, t)),
                               cancel=cancel)
    except Exception as exc:
        send(b"E", _scrub(f"{type(exc).__name__}: {exc}", job.get("api_key")).encode())
        return 1
    send(b"R", pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        sys.exit(_child_main())
    print("internal entry point: use tuning.loadgen.run_load_in_subprocess", file=sys.stderr)
    sys.exit(2)
