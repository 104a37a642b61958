"""Resident engines' engine side (issue 38, item 4), on the fake vLLM's sleep mode: two servers one
flag apart with one explicit KV budget, switched by sleeping the one in hand and waking the
other (never two awake), the one asleep holding no device memory and refusing requests; a wake
that does not give back a fresh start's KV capacity is said; which flags may switch at all."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.engines import fake_launch
from tuning.engine.server import ServerProcess, http_get
from tuning.engine.sleep_mode import (
    SleepMode,
    SleepModeError,
    kv_after_wake,
    resident_env,
    switch,
    why_not,
)

KV = 64 * 2**20


def resident(tmp: Path, seqs: int, faults: str = "", dev: bool = True) -> ServerProcess:
    launch = fake_launch({"max-num-seqs": seqs, "kv-cache-memory-bytes": KV}, faults=faults)
    launch = replace(
        launch,
        argv=[*launch.argv, "--enable-sleep-mode"],
        env={**launch.env, **(resident_env() if dev else {})},
    )
    return ServerProcess(launch, tmp / f"server-{seqs}.log")


def state(server: ServerProcess) -> dict[str, Any]:
    return dict(json.loads(http_get(server.launch.base_url + "/fake/state")[1]))


def kv_tokens(server: ServerProcess) -> int:
    _, text = http_get(server.launch.base_url + "/metrics")
    line = next(x for x in text.splitlines() if x.startswith("vllm:cache_config_info"))
    return int(line.split('kv_cache_size_tokens="')[1].split('"')[0])


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    with ExitStack() as stack:
        servers = [stack.enter_context(resident(tmp_path, n)) for n in (256, 64)]
        for server in servers:
            server.wait_healthy(timeout=60)
        yield servers[0], servers[1]


def test_switching_sleeps_the_one_in_hand_then_wakes_the_other(
    pair: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = pair
    sa, sb = SleepMode(a.launch.base_url), SleepMode(b.launch.base_url)
    fresh = kv_tokens(a)
    sb.sleep()  # b waits asleep while a serves
    assert (sa.is_sleeping(), sb.is_sleeping()) == (False, True)
    assert state(b)["device_bytes"] == 0 and state(a)["device_bytes"] > KV
    for _ in range(3):
        done = switch(sa, sb)  # a to sleep, then b awake
        assert done.seconds < 10 and (sa.is_sleeping(), sb.is_sleeping()) == (True, False)
        sa, sb = sb, sa
    asleep = a if SleepMode(a.launch.base_url).is_sleeping() else b
    body = json.dumps({"model": "fake", "prompt": "hi", "max_tokens": 2}).encode()
    request = urllib.request.Request(
        asleep.launch.base_url + "/v1/completions", data=body, method="POST"
    )
    request.add_header("Content-Type", "application/json")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 (loopback)
    assert refused.value.code == 503
    awake = b if asleep is a else a
    SleepMode(awake.launch.base_url).sleep()
    SleepMode(asleep.launch.base_url).wake()
    woken = urllib.request.Request(asleep.launch.base_url + "/v1/completions", data=body)
    woken.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(woken, timeout=10) as answered:  # noqa: S310 (loopback)
        assert answered.status == 200  # the woken server answers the next request normally
    assert kv_after_wake(fresh, kv_tokens(a)) is None  # the same KV capacity as a fresh start
    assert state(a)["sleeps"] >= 1 and state(asleep)["sleep_level"] == 0


def test_a_wake_that_does_not_give_the_kv_back_is_said(tmp_path: Path) -> None:
    with resident(tmp_path, 256, faults="wake_kv_tokens=1024") as server:
        server.wait_healthy(timeout=60)
        mode = SleepMode(server.launch.base_url)
        fresh = kv_tokens(server)
        mode.sleep()
        mode.wake()
        why = kv_after_wake(fresh, kv_tokens(server))
    assert why is not None and "1,024 tokens" in why and f"{fresh:,}" in why


def test_without_dev_mode_there_is_no_sleep_mode(tmp_path: Path) -> None:
    with resident(tmp_path, 256, dev=False) as server:
        server.wait_healthy(timeout=60)
        mode = SleepMode(server.launch.base_url, timeout=5)
        assert not mode.available()
        with pytest.raises(SleepModeError, match="HTTP 404"):
            mode.sleep()


def test_which_flags_may_switch_resident_servers() -> None:
    flags = {"enable-sleep-mode", "max-num-seqs", "stream-interval"}
    assert why_not("stream-interval", "gpu", flags) is None
    assert why_not("max-num-seqs", "gpu", flags) is None
    assert "sizes the engine's memory" in (why_not("kv-cache-memory-bytes", "gpu", flags) or "")
    assert why_not("max-num-seqs", "cpu", None) is None  # a CPU vLLM's servers are paused
    assert "need CUDA (sleep mode)" in (why_not("max-num-seqs", "tpu", flags) or "")
    assert "no --enable-sleep-mode" in (why_not("max-num-seqs", "gpu", {"max-num-seqs"}) or "")
    assert "not read yet" in (why_not("max-num-seqs", "gpu", None) or "")
