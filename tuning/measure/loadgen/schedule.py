"""Planned traffic on the wire: a `tuning.measure.traffic.Schedule` sent in a closed loop, an open
loop or as a trace, conversations turn by turn, one `RequestRecord` per request.

- closed (the default): `concurrency` workers, each takes the next conversation and sends its turns
  in order; with single-turn traffic this is exactly `client.run_load`'s closed loop.
- open / trace: each conversation starts at its planned offset (`PlannedRequest.offset_s`, gamma
  gaps at the target rate or the trace's timestamps over the speed factor), at most
  `max_concurrency` requests in flight when set; a request that waits for a slot goes out late.
- multi-turn: turn k goes out `think_time_s` after turn k-1's answer ended and carries the whole
  history with the real answers of earlier turns in place of the plan's placeholders (a failed
  turn keeps its placeholder, so the conversation goes on with the planned lengths).

Every record says its conversation, turn and, where a send time was planned (open/trace first turns;
later turns everywhere: previous end + think time), `dispatch_lag` = actual - planned, in seconds:
a client or a concurrency cap that cannot keep the schedule shows there, never hidden in a latency.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any, Unpack

from core.records import RequestRecord
from tuning.measure.loadgen import http1
from tuning.measure.loadgen.client import (
    DEFAULT_TRANSPORT,
    LoadError,
    LoadOptions,
    LoadResult,
    _Client,
    _Phase,
)
from tuning.measure.loadgen.endpoint import api_key_from_env
from tuning.measure.loadgen.sse import SSEReader, classify
from tuning.measure.loadgen.start import loop_factory
from tuning.measure.telemetry.server_stats import Settled
from tuning.measure.traffic import PlannedRequest, Schedule, render_messages, render_text
from tuning.measure.traffic.workload import Endpoint, Workload

# An open loop without a cap still needs a connection pool size: at most this many sockets.
OPEN_POOL_MAX = 4096
# First turns' request bodies are encoded before the clock starts, up to this many bytes in all
# (the rest when sent): at 1,000 req/s the encoding is a tenth of the client's time per request.
PREENCODE_MAX_BYTES = 256 * 2**20
# Open loop / trace on the raw transport: keep-alive sockets opened before the clock, so a burst
# reuses them instead of paying connection setup inside the schedule (more open as needed).
PREOPEN_MAX = 64


async def sleep_until(deadline: float) -> None:
    """Sleep until `perf_counter()` reaches `deadline`, never before it.

    uvloop's timers tick in whole milliseconds and fire up to half of one early (a CI run stored a
    dispatch lag of -89 us); sleeping again for what is left keeps every send on or after its plan.
    """
    while (left := deadline - time.perf_counter()) > 0:
        await asyncio.sleep(left)


def plan_concurrency(plan: Schedule) -> int:
    """Requests in flight at most: closed loop C, the open loop's cap, or every conversation."""
    arrival = plan.spec.arrival
    conversations = len({r.conversation for r in plan.requests}) or 1
    if arrival.kind == "closed":
        return min(arrival.concurrency, conversations)
    if arrival.max_concurrency is not None:
        return arrival.max_concurrency
    return min(conversations, OPEN_POOL_MAX)


def plan_workload(
    plan: Schedule,
    num_warmups: int,
    endpoint: Endpoint = "completions",
    request_timeout_s: float = 600.0,
    seed: int = 0,
) -> Workload:
    """The `Workload` the client runs a plan under: its request count, concurrency, warm-ups,
    endpoint and timeout (lengths come from the plan, these are placeholders)."""
    return Workload(
        num_requests=len(plan.requests),
        concurrency=plan_concurrency(plan),
        input_len=1,
        output_len=1,
        endpoint=endpoint,
        seed=seed,
        num_warmups=num_warmups,
        request_timeout_s=request_timeout_s,
    )


def answer_text(raw: bytes) -> str:
    """The generated text of a streamed response (completions `text`, chat `delta.content`)."""
    out: list[str] = []
    for event in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        kind, obj = classify(event)
        if kind != "content":
            continue
        if obj is None:
            lines = [ln[5:].strip() for ln in event.strip().split(b"\n") if ln.startswith(b"data:")]
            try:
                obj = json.loads(b"\n".join(lines))
            except ValueError:
                continue
        for choice in obj.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta")
            text = delta.get("content") if isinstance(delta, dict) else choice.get("text")
            if isinstance(text, str):
                out.append(text)
    return "".join(out)


class _Capture(SSEReader):
    """An SSE reader that also keeps the body bytes, for the answer a later turn sends back."""

    __slots__ = ("raw", "finishing")

    def __init__(self, rec: RequestRecord, st: float, asked: tuple[int | None, int]) -> None:
        super().__init__(rec, st, asked)
        self.raw = bytearray()
        self.finishing = False

    def feed(self, data: bytes, t: float) -> bool:
        if not self.finishing:  # finish() re-feeds the pending tail: it is already kept
            self.raw += data
        return super().feed(data, t)

    def finish(self) -> None:
        self.finishing = True
        super().finish()


class _PlanClient(_Client):
    """`_Client` whose measured phase is a plan: per-request bodies, schedule and conversations."""

    def __init__(
        self, base_url: str, model: str, plan: Schedule, workload: Workload, **kw: Any
    ) -> None:
        super().__init__(base_url, model, workload, **kw)
        self.model = model
        self.plan = plan
        self.chat = workload.endpoint == "chat"
        self.capture = any(r.turn > 0 for r in plan.requests)
        self.measuring = False
        self.bodies: dict[int, bytes] = {}  # first turns' bodies, encoded before the clock
        self.conversations: list[list[PlannedRequest]] = []
        for r in plan.requests:
            if not self.conversations or self.conversations[-1][0].conversation != r.conversation:
                self.conversations.append([])
            self.conversations[-1].append(r)

    def _reader(self, rec: RequestRecord, st: float, size: int) -> SSEReader:
        if not self.measuring:  # a warm-up: the workload's own request
            return super()._reader(rec, st, size)
        asked = (self.plan.requests[rec.index].output_len, size)  # this request's max_tokens
        return _Capture(rec, st, asked) if self.capture else SSEReader(rec, st, asked)

    def body(self, req: PlannedRequest, answers: dict[int, str]) -> bytes:
        data: dict[str, Any] = {
            "model": self.model,
            "max_tokens": req.output_len,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if self.chat:
            data["messages"] = render_messages(req, answers)
        else:
            data["prompt"] = render_text(req, answers)
        return json.dumps(data, separators=(",", ":")).encode()

    async def _measure(
        self, phase: _Phase, warm_failed: list[RequestRecord], before: Settled | None
    ) -> LoadResult:
        self.measuring = True
        size = 0
        for turns in self.conversations:
            if size > PREENCODE_MAX_BYTES:
                break
            body = self.bodies[turns[0].index] = self.body(turns[0], {})
            size += len(body)
        if self.transport == "raw" and self.plan.spec.arrival.kind != "closed":
            await self._preopen(min(plan_concurrency(self.plan), PREOPEN_MAX) - len(self._slots))
        return await super()._measure(phase, warm_failed, before)

    async def _preopen(self, n: int) -> None:
        """Open `n` idle keep-alive sockets into the pool; one that fails is left to the request
        that would have used it (it opens its own and records the failure)."""
        opened = await asyncio.gather(
            *(http1.RawConnection.open(self._raw_target) for _ in range(max(0, n))),
            return_exceptions=True,
        )
        self._slots.extend([c] for c in opened if isinstance(c, http1.RawConnection))

    async def _run_phase(self, phase: _Phase) -> None:
        if not self.measuring:
            await super()._run_phase(phase)
            return
        if self.plan.spec.arrival.kind == "closed":
            order = iter(self.conversations)
            workers = min(self.workload.concurrency, len(self.conversations))
            tasks = [asyncio.create_task(self._closed_worker(phase, order)) for _ in range(workers)]
        else:
            tasks = []
        try:
            if self.plan.spec.arrival.kind != "closed":
                await self._dispatch(phase, tasks)
            await asyncio.gather(*tasks)
        except asyncio.CancelledError:
            await self._cancel_all(tasks)
            raise

    async def _closed_worker(self, phase: _Phase, order: Any) -> None:
        slot: http1.Slot = self._slots.pop() if self._slots else [None]
        try:
            for turns in order:
                if self.stop:
                    return
                await self._conversation(phase, turns, None, None, slot)
        finally:
            self._slots.append(slot)

    async def _dispatch(self, phase: _Phase, tasks: list[asyncio.Task[None]]) -> None:
        """Start each conversation at its planned offset (sorted; ties keep plan order)."""
        cap = self.plan.spec.arrival.max_concurrency
        gate = asyncio.Semaphore(cap) if cap is not None else None
        starts = sorted(self.conversations, key=lambda c: c[0].offset_s or 0.0)
        for turns in starts:
            planned = self.t0 + (turns[0].offset_s or 0.0)
            await sleep_until(planned)
            if self.stop:
                return
            tasks.append(asyncio.create_task(self._conversation(phase, turns, planned, gate)))

    async def _conversation(
        self,
        phase: _Phase,
        turns: Sequence[PlannedRequest],
        planned: float | None,
        gate: asyncio.Semaphore | None,
        slot: http1.Slot | None = None,
    ) -> None:
        """A conversation's turns in order; `planned` is turn 0's send time (perf_counter)."""
        answers: dict[int, str] = {}
        for req in turns:
            if self.stop:
                return
            if req.turn > 0:
                planned = time.perf_counter() + req.think_time_s
                await sleep_until(planned)
            rec = RequestRecord(
                index=req.index, start=0.0, conversation=req.conversation, turn=req.turn
            )
            phase.records[req.index] = rec
            body = self.bodies.pop(req.index, None) or self.body(req, answers)
            sse = await self._send(rec, body, gate, slot)
            if planned is not None:
                rec.dispatch_lag = rec.start + self.t0 - planned
            phase.done += 1
            if isinstance(sse, _Capture) and rec.ok:
                answers[req.turn] = answer_text(bytes(sse.raw))

    async def _send(
        self,
        rec: RequestRecord,
        body: bytes,
        gate: asyncio.Semaphore | None,
        slot: http1.Slot | None,
    ) -> SSEReader:
        if slot is not None:  # a closed-loop worker's own connection
            return await self._request(rec, body, slot)
        if gate is not None:
            await gate.acquire()
        own: http1.Slot = self._slots.pop() if self._slots else [None]
        try:
            return await self._request(rec, body, own)
        finally:
            self._slots.append(own)
            if gate is not None:
                gate.release()


def check_plan(plan: Schedule, warmup_prompts: Sequence[str], workload: Workload) -> None:
    if workload.num_requests != len(plan.requests) or workload.warmups != len(warmup_prompts):
        raise LoadError(
            f"the workload says {workload.warmups} warm-ups + {workload.num_requests} requests; "
            f"got {len(warmup_prompts)} warm-up prompts and a plan of {len(plan.requests)}"
        )
    if not plan.requests:
        raise LoadError("the plan has no requests")


async def run_schedule(
    base_url: str,
    model: str,
    plan: Schedule,
    warmup_prompts: Sequence[str],
    workload: Workload,
    **options: Unpack[LoadOptions],
) -> LoadResult:
    """Warm up with `warmup_prompts` (closed loop, unmeasured), then send the plan.

    `workload` is `plan_workload(plan, len(warmup_prompts), ...)`; options as `client.run_load`.
    Records come back in plan order (`index`), with conversation, turn and dispatch lag.
    """
    check_plan(plan, warmup_prompts, workload)
    key = options.get("api_key")
    client = _PlanClient(
        base_url,
        model,
        plan,
        workload,
        api_key=key if key is not None else api_key_from_env(),
        on_progress=options.get("on_progress"),
        cancel=options.get("cancel"),
        on_phase=options.get("on_phase"),
        transport=options.get("transport", DEFAULT_TRANSPORT),
        server_stats=options.get("server_stats", False),
    )
    prompts = [*warmup_prompts, *([""] * len(plan.requests))]
    result = await client.run(prompts)
    result.records.sort(key=lambda r: r.index)
    return result


def run_schedule_sync(
    base_url: str,
    model: str,
    plan: Schedule,
    warmup_prompts: Sequence[str],
    workload: Workload,
    **options: Unpack[LoadOptions],
) -> LoadResult:
    """`run_plan` in a fresh event loop, for plain threads and processes."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(run_schedule(base_url, model, plan, warmup_prompts, workload, **options))


def dispatch_lags(records: Sequence[RequestRecord]) -> dict[str, float | int]:
    """Summary of the dispatch lag of the requests that had a planned send time (seconds)."""
    lags = sorted(r.dispatch_lag for r in records if r.dispatch_lag is not None)
    if not lags:
        return {"planned": 0}
    return {
        "planned": len(lags),
        "mean_s": sum(lags) / len(lags),
        "p99_s": lags[min(len(lags) - 1, int(0.99 * len(lags)))],
        "max_s": lags[-1],
    }
