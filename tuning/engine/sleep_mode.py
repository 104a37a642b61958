"""Resident engines, the engine's side (issue 38, item 4): vLLM's sleep mode on a server the lab
started and bound to 127.0.0.1, and whether an experiment's flag may be compared this way.

What the user's vLLM needs: CUDA (sleep mode lives in vLLM's CUDA memory pool), the flag
`--enable-sleep-mode` in its parser, and its dev endpoints switched on in the server's
environment (`VLLM_SERVER_DEV_MODE=1`): `POST /sleep?level=1` offloads the weights to CPU memory
and drops the KV cache, `POST /wake_up` brings both back, `GET /is_sleeping` says which. The lab
turns both on only on servers it starts itself for resident runs, on 127.0.0.1: the dev
endpoints must never face a network.

Two resident servers one flag apart are sized alike (the same explicit KV budget), so only a flag
that does not size memory can be compared by switching (`why_not` says why another cannot, in
words); the switch itself is `switch`: sleep the one in hand, then wake the other. Never two
awake: a server is asleep before another wakes or starts.

A CPU vLLM has no sleep mode: its resident servers are paused instead (tuning.engine.pause,
SIGSTOP / SIGCONT of the server's process group), with their own configuration unchanged; a
paused server uses no CPU at all, so only the server in hand runs (the same rule as "never two
awake"). `why_not` gives that way's conditions too.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from tuning.engine.pause import pausable

DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"
SLEEP_FLAG = "enable-sleep-mode"
# Flags that size the engine's memory (its KV budget, what a token or a block costs, how long a
# sequence may be, how the model is split or stored): two servers one of these apart cannot be
# given the same explicit KV budget and be compared by switching.
MEMORY_FLAGS = frozenset(
    {
        "gpu-memory-utilization",
        "kv-cache-memory-bytes",
        "kv-cache-dtype",
        "block-size",
        "max-model-len",
        "dtype",
        "quantization",
        "tensor-parallel-size",
        "pipeline-parallel-size",
        "data-parallel-size",
        "cpu-offload-gb",
        "swap-space",
        "enable-sleep-mode",
        "enforce-eager",  # the CUDA-graph pool stays allocated through a sleep
        "cuda-graph-sizes",
        "compilation-config",
    }
)
# vLLM's parser has had --enable-sleep-mode (CUDA) since 0.7; from this version on, a first
# experiment need not wait for the parser to be read (18.6 s of an H100's first run) before its
# first start: the flags are read beside it and checked before the first switch.
SLEEP_SINCE = (0, 8)
# On a CPU vLLM the KV budget is also its environment's (VLLM_CPU_KVCACHE_SPACE, GiB of RAM).
CPU_MEMORY_FLAGS = frozenset({"VLLM_CPU_KVCACHE_SPACE", "kv-cache-memory-bytes"})
POLL_S = 0.02


class SleepModeError(RuntimeError):
    """The server did not sleep or wake as asked (no sleep mode, an error, a timeout)."""


def why_not(param: str, backend: str, engine_flags: Collection[str] | None) -> str | None:
    """Why an experiment of `param` on this engine restarts instead of switching resident
    servers; None when it may switch. `engine_flags`: the flag names its vLLM's parser has
    (None: not read; a CPU vLLM's are not needed: its servers are paused, not put to sleep)."""
    if backend == "cpu":
        return why_not_pause(param)
    if backend != "gpu":
        return (
            "resident engines need CUDA (sleep mode) or a CPU vLLM (pausing): this engine's "
            "backend is " + (backend or "unknown")
        )
    if param in MEMORY_FLAGS:
        return f"{param} sizes the engine's memory: two servers cannot share one KV budget"
    if engine_flags is None:
        return "this vLLM's flags are not read yet (`flags`): whether it has sleep mode is unknown"
    if SLEEP_FLAG not in engine_flags:
        return f"this vLLM has no --{SLEEP_FLAG}"
    return None


def sleep_flag_by_version(version: str | None) -> bool:
    """Whether a vLLM of this version has `--enable-sleep-mode` by its release history (a
    version the lab cannot read, "unknown", says no: its parser is read first)."""
    found = re.match(r"\s*v?(\d+)\.(\d+)", version or "")
    return found is not None and (int(found[1]), int(found[2])) >= SLEEP_SINCE


def why_not_pause(param: str) -> str | None:
    """Why a CPU vLLM's experiment of `param` cannot pause resident servers; None when it may
    (the RAM for a second server is measured when it starts: tuning.engine.pause.why_short)."""
    if param in MEMORY_FLAGS or param in CPU_MEMORY_FLAGS:
        return (
            f"{param} sizes the engine's memory: resident servers one flag apart must be sized "
            "alike"
        )
    return pausable()


def resident_config(config: Mapping[str, Any], kv_bytes: int) -> dict[str, Any]:
    """A value's configuration as a resident server runs it: sleep mode on, the shared budget."""
    return {**config, SLEEP_FLAG: True, "kv-cache-memory-bytes": int(kv_bytes)}


def resident_env() -> dict[str, str]:
    """The environment a resident server needs besides its launch's (its dev endpoints)."""
    return {DEV_MODE_ENV: "1"}


def kv_after_wake(fresh_tokens: int | None, woken_tokens: int | None) -> str | None:
    """Why a woken server is not the server a fresh start gives (its KV capacity differs), in
    words; None when it is the same (or either is unknown: then the check cannot be made)."""
    if fresh_tokens is None or woken_tokens is None or fresh_tokens == woken_tokens:
        return None
    return (
        f"after a wake the KV cache holds {woken_tokens:,} tokens, after a fresh start "
        f"{fresh_tokens:,}: restarting instead"
    )


class SleepMode:
    """The sleep endpoints of one server (its base URL, the lab's own loopback server)."""

    def __init__(self, base_url: str, timeout: float = 30.0) -> None:
        self.root = base_url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def _call(self, method: str, path: str) -> tuple[int, bytes]:
        request = urllib.request.Request(
            self.root + path, method=method, data=b"" if method == "POST" else None
        )
        try:
            with self._opener.open(request, timeout=self.timeout) as resp:  # noqa: S310 (loopback)
                return int(resp.status), resp.read()
        except urllib.error.HTTPError as exc:
            return int(exc.code), b""
        except (OSError, urllib.error.URLError) as exc:
            raise SleepModeError(f"{method} {path}: {exc}") from None

    def is_sleeping(self) -> bool | None:
        """True asleep, False awake, None when the server has no sleep endpoints."""
        status, body = self._call("GET", "/is_sleeping")
        if status != 200:
            return None
        try:
            return bool(json.loads(body)["is_sleeping"])
        except (ValueError, KeyError, TypeError):
            return None

    def available(self) -> bool:
        return self.is_sleeping() is not None

    def _until(self, asleep: bool, since: float) -> float:
        deadline = since + self.timeout
        while self.is_sleeping() is not asleep:
            if time.monotonic() > deadline:
                word = "asleep" if asleep else "awake"
                raise SleepModeError(f"not {word} {self.timeout:.0f} s after asking")
            time.sleep(POLL_S)
        return time.monotonic() - since

    def sleep(self, level: int = 1) -> float:
        """Put it to sleep (level 1: weights to CPU, KV dropped); the seconds it took."""
        t0 = time.monotonic()
        status, _ = self._call("POST", f"/sleep?level={int(level)}")
        if status != 200:
            raise SleepModeError(f"POST /sleep answered HTTP {status}")
        return self._until(True, t0)

    def wake(self) -> float:
        """Wake it; the seconds until it says it is awake."""
        t0 = time.monotonic()
        status, _ = self._call("POST", "/wake_up")
        if status != 200:
            raise SleepModeError(f"POST /wake_up answered HTTP {status}")
        return self._until(False, t0)


@dataclass(frozen=True)
class Switched:
    """One switch between resident servers: how long falling asleep and waking took."""

    slept_s: float
    woke_s: float

    @property
    def seconds(self) -> float:
        return self.slept_s + self.woke_s


def switch(awake: SleepMode, asleep: SleepMode, level: int = 1) -> Switched:
    """Sleep the server in hand first (its memory freed), then wake the other: never two awake."""
    slept = awake.sleep(level)
    return Switched(slept, asleep.wake())
