"""How a load starts: the prompts checked against the workload, the closed-loop client
(tuning.measure.loadgen.client) built from its options, and the event loop it runs in (uvloop
when installed), for the runner's thread, the load's child process and `bench`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Unpack

from tuning.measure.loadgen.client import DEFAULT_TRANSPORT, _Client
from tuning.measure.loadgen.endpoint import api_key_from_env
from tuning.measure.loadgen.result import LoadError, LoadOptions, LoadResult
from tuning.measure.traffic.workload import Workload


def check_prompts(prompts: Sequence[str], workload: Workload) -> None:
    """Refuse a prompt list that does not match the workload (warm-ups first, then measured)."""
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
    **options: Unpack[LoadOptions],
) -> LoadResult:
    """Warm up, then send `workload.num_requests` measured requests keeping C in flight.

    `prompts` is `build_prompts(workload, ...)`: warm-ups first. `api_key` defaults to
    OPENAI_API_KEY. `on_progress(done, total)` is called about every 250 ms and at the end, from the
    event loop's thread; `on_phase` gets "warming_up" (only when there are warm-ups) and "loading"
    (just before the first measured dispatch). `transport` is "aiohttp" or "raw" (see
    TRANSPORTS). Setting `cancel` stops dispatching and cancels in-flight requests (recorded
    as failed, `cancelled: ...`); the result then has `cancelled=True`.
    """
    check_prompts(prompts, workload)
    key = options.get("api_key")
    client = _Client(
        base_url,
        model,
        workload,
        key if key is not None else api_key_from_env(),
        options.get("on_progress"),
        options.get("cancel"),
        options.get("on_phase"),
        options.get("transport", DEFAULT_TRANSPORT),
        options.get("server_stats", False),
    )
    return await client.run(prompts)


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def run_load_sync(
    base_url: str,
    model: str,
    prompts: Sequence[str],
    workload: Workload,
    **options: Unpack[LoadOptions],
) -> LoadResult:
    """`run_load` in a fresh event loop (uvloop when installed), for plain threads and processes."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(run_load(base_url, model, prompts, workload, **options))
