"""One vLLM server's life: start, wait until healthy, read what it says about itself, stop for good.

A start is launched with an argv list in a new session (its own process group), writes one log file,
and is stopped by group with escalation. `stop()` returns only when every process of the group is
gone and the port is free, so the next start of an experiment never meets the previous one.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Self

import psutil
from prometheus_client.parser import text_string_to_metric_families

from core.plausible import count
from tuning.engine import ipc_dir
from tuning.engine.failure_words import FailureWords
from tuning.engine.failure_words import classify_failure as classify_failure  # its home before
from tuning.engine.launch import Launch
from tuning.engine.log_facts import Sheet, read_sheet
from tuning.engine.procs import continue_group, process_start_time, stop_group
from tuning.engine.server_log import Block, tail
from tuning.engine.startup_anatomy import LogStamps, anatomy

LOG_TAIL_LINES = 60
# A failed start's log is read for its words until the start timeout, and at least this long.
FAILED_READ_S = 2.0
# Once the API server (the group leader) has exited on SIGTERM, what is left of its group gets this
# long before SIGKILL: a straggler that ignores SIGTERM must not cost the whole grace per stop.
STRAGGLER_GRACE_S = 2.0
# Between two /health polls while a server starts: the start's end is seen this late at most (it
# was 0.5 s: a quarter of a second lost a start on average, and time to healthy that coarse).
HEALTH_POLL_S = 0.2

HINTS: dict[str, str] = {
    "invalid_argument": "vLLM's argument parser refused a flag or value: check the parameter "
    "spelling and range for this vLLM version (removed flags exit with code 2).",
    "engine_init": "The engine started but refused this configuration; the engine's reason is "
    "quoted. Pick a value the backend supports (e.g. a block size that is a "
    "multiple of 32 on the CPU backend) and run again.",
    "out_of_memory": "Not enough memory for the weights or the KV cache: lower "
    "gpu-memory-utilization / kv-cache-memory-bytes / max-model-len, or wait "
    "until the previous server has released its memory.",
    "port_in_use": "The port was taken by another process; the lab picks a fresh port on the "
    "next start. Look for a stray server on this machine.",
    "timeout": "The server did not answer /health in time. Raise the start timeout (a cold "
    "torch.compile can take minutes) or use enforce-eager.",
    "crashed": "The server exited before it was healthy without a known reason; read the log "
    "excerpt.",
}


class StartFailure(RuntimeError):
    """A start that did not become healthy; a result to store, not a crash of the lab."""

    def __init__(
        self,
        kind: str,
        reason: str,
        log_tail: str,
        returncode: int | None,
        vllm_version: str | None = None,
    ):
        super().__init__(f"{kind}: {reason}")
        self.kind = kind
        self.reason = reason
        self.hint = HINTS.get(kind, HINTS["crashed"])
        self.log_tail = log_tail
        self.returncode = returncode
        self.vllm_version = vllm_version  # what the log said before it failed, if it did

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "hint": self.hint,
            "returncode": self.returncode,
        }


class StopFailure(RuntimeError):
    """A server that did not go away: a process outlived SIGKILL or the port stayed ours."""


@dataclass
class StartupFacts:
    """What the engine says about its memory at start; None means it did not say."""

    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    max_concurrency_tokens_per_request: int | None = None
    kv_cache_memory_gib: float | None = None
    weights_memory_gib: float | None = None
    memory_line: str | None = None
    init_engine_seconds: float | None = None
    vllm_version: str | None = None
    engine_pids: dict[str, int] = field(default_factory=dict)
    block_size: int | None = None
    num_blocks: int | None = None
    kv_cache_memory_bytes: int | None = None
    enable_prefix_caching: bool | None = None
    cache_config: dict[str, str] = field(default_factory=dict)
    time_to_healthy_s: float | None = None
    anatomy: dict[str, Any] = field(default_factory=dict)  # tuning.engine.startup_anatomy
    # Facts the launch's own lines gave different values for (tuning.engine.log_facts.Conflict),
    # shown
    # with the run's config mismatches; and how the log was read (bytes, complete, foreign lines).
    log_conflicts: list[dict[str, Any]] = field(default_factory=list)
    log_read: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def startup_facts(sheet: Sheet) -> StartupFacts:
    """The startup facts of a read log (engine.log_facts): vLLM's own lines, the last word."""
    said = sheet.values
    available = said.get("kv_gib_available")
    return StartupFacts(
        kv_cache_tokens=said.get("kv_cache_tokens"),
        max_concurrency=said.get("max_concurrency"),
        max_concurrency_tokens_per_request=said.get("max_concurrency_tokens_per_request"),
        kv_cache_memory_gib=available if available is not None else said.get("kv_gib_cpu"),
        weights_memory_gib=said.get("weights_gib"),
        memory_line=said.get("memory_line"),
        init_engine_seconds=said.get("init_engine_seconds"),
        vllm_version=said.get("vllm_version"),
        engine_pids=dict(sheet.engine_pids),
        log_conflicts=[c.to_dict() for c in sheet.conflicts.values()],
        log_read=sheet.read_record(),
    )


def parse_startup_log(log: str | Path | Sheet, pids: Collection[int] | None = None) -> StartupFacts:
    """What vLLM's own lines say at start; with `pids`, only the lines of those processes."""
    return startup_facts(read_sheet(log, pids))


def parse_cache_config(metrics_text: str) -> dict[str, str]:
    """The labels of `vllm:cache_config_info`, which carry the engine's resolved cache config."""
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "vllm:cache_config_info":
            for sample in family.samples:
                return dict(sample.labels)
    return {}


def apply_cache_config(facts: StartupFacts, labels: dict[str, str]) -> None:
    def as_int(key: str) -> int | None:  # a count (core.plausible): inf, -5 or 1.5 is none
        try:
            return count(float(labels[key]))
        except (KeyError, ValueError):
            return None

    facts.cache_config = labels
    facts.block_size = as_int("block_size")
    facts.num_blocks = as_int("num_gpu_blocks")
    facts.kv_cache_memory_bytes = as_int("kv_cache_memory_bytes")
    if facts.kv_cache_tokens is None:
        facts.kv_cache_tokens = as_int("kv_cache_size_tokens")
    if "enable_prefix_caching" in labels:
        facts.enable_prefix_caching = labels["enable_prefix_caching"] == "True"


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_holders(port: int) -> dict[int, float]:
    """The pids listening on `port` that this user can see, with their start times."""
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return {}
    out: dict[int, float] = {}
    for conn in conns:
        if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port:
            started = process_start_time(conn.pid) if conn.pid else None
            if conn.pid and started is not None:
                out[conn.pid] = started
    return out


def describe_holders(port: int) -> str:
    """`pid 123 (python3)` for each visible listener on `port`, for a message."""
    names = []
    for pid in port_holders(port):
        try:
            names.append(f"pid {pid} ({psutil.Process(pid).name()})")
        except psutil.Error:
            names.append(f"pid {pid}")
    return ", ".join(names) or "a process this user cannot see"


def http_get(url: str, timeout: float = 2.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 (loopback only)
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


class ServerProcess:
    """Start, watch and stop one vLLM server launched from a validated `Launch`.

    As a context manager it starts on entry (unless already started) and stops the whole process
    group on exit, whatever happened inside:

        with ServerProcess(launch, log) as server:
            facts = server.wait_healthy()
    """

    def __init__(self, launch: Launch, log_path: Path):
        self.launch = launch
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid: int | None = None
        self.started_at: float | None = None
        self.facts = StartupFacts()
        self.start_time: float | None = None  # the leader's start time, its identity with the pid
        self.stamps: LogStamps | None = None  # the start's milestones, on the lab's clock
        self.ipc_dir: Path | None = (
            None  # the engine's sockets (tuning.engine.ipc_dir), removed on stop
        )
        # The launch's processes (the leader and each descendant seen while it started): the only
        # pids whose log lines are facts (tuning.engine.log_facts).
        self.pids: set[int] = set()
        self.sheet: Sheet | None = None  # what its log said, read while it started
        # When a start was seen to fail (exit or timeout), before its log was read and it was
        # stopped: where the run's anatomy ends "start" (tuning.experiment.run_anatomy).
        self.failed_at: float | None = None
        # A prelaunched start (tuning.engine.prelaunch): when it was let go; when it was healthy.
        self.released_at: float | None = None
        self.healthy_at: float | None = None
        self._stopped = False

    def __enter__(self) -> Self:
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        """Launch; StartFailure("port_in_use") without starting anything when the port is taken
        (the process holding it is never signalled)."""
        host, port = self.launch.host, self.launch.port
        if not port_is_free(host, port):
            raise StartFailure(
                "port_in_use",
                f"port {port} on {host} is already in use by {describe_holders(port)}; "
                "nothing was started",
                "",
                None,
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.launch.env, "PYTHONUNBUFFERED": "1"}
        for name in self.launch.unset_env:  # e.g. a KV budget that would override a flag
            env.pop(name, None)
        env.pop("OPENAI_API_KEY", None)  # a secret for remote endpoints never reaches the engine
        if ipc_dir.VAR not in env:
            ipc_dir.sweep()
            self.ipc_dir = ipc_dir.create()
            env[ipc_dir.VAR] = str(self.ipc_dir)
        # A new file for each launch (never appended to): the facts read from it are this launch's.
        try:
            with open(self.log_path, "wb") as log:
                self.proc = subprocess.Popen(
                    self.command(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=self.stdin(),
                    env=env,
                    start_new_session=True,
                )
        except BaseException:
            ipc_dir.remove(self.ipc_dir)
            raise
        self.pgid = self.proc.pid
        self.pids = {self.proc.pid}
        self.started_at = time.monotonic()
        self.start_time = process_start_time(self.proc.pid)
        # One reader follows the log while the server starts: its milestones and its facts.
        self.sheet = Sheet(self.pids, look_up=self.note_pids)
        self.stamps = LogStamps(self.log_path, self.started_at, self.sheet).start()
        self._stopped = False

    def command(self) -> list[str]:
        """The argv started: the launch's own (a prelaunched start wraps it)."""
        return self.launch.argv

    def stdin(self) -> int:
        return subprocess.DEVNULL

    def startup_times(
        self, healthy_s: float, stamps: dict[str, float]
    ) -> tuple[float, dict[str, float]]:
        """(time to healthy, milestone stamps) as a user's plain start would show them."""
        return healthy_s, stamps

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last lines of the log, read from its end (each cut to a few KB)."""
        return tail(self.log_path, lines)

    def note_pids(self) -> None:
        """Add the launch's processes alive now (the leader's descendants) to `pids`."""
        if self.proc is None:
            return
        try:
            self.pids.update(p.pid for p in psutil.Process(self.proc.pid).children(recursive=True))
        except psutil.Error:
            pass

    def read_log(self, deadline: float, also: list[Callable[[Block], None]] | None = None) -> Sheet:
        """One pass over the log until `deadline`: the facts of the launch's own lines."""
        self.note_pids()
        return read_sheet(self.log_path, self.pids, deadline, also or [])

    def wait_healthy(
        self, timeout: float = 300.0, on_poll: Callable[[float], None] | None = None
    ) -> StartupFacts:
        """Poll /health until 200, then read the log; a process exit or the timeout (which covers
        the read too) raises StartFailure."""
        assert self.proc is not None and self.started_at is not None
        deadline = (self.released_at or self.started_at) + timeout  # not while it waited for go
        url = self.launch.base_url
        while True:
            self.note_pids()
            code = self.proc.poll()
            if code is not None:
                self.failed_at = time.monotonic()
                words = FailureWords()
                read_until = max(deadline, time.monotonic() + FAILED_READ_S)
                version = self.read_log(read_until, [words.feed_block]).get("vllm_version")
                kind, reason = words.verdict(code)
                self.stop(port_was_ours=kind != "port_in_use")
                raise StartFailure(kind, reason, self.log_tail(), code, version)
            try:
                status, _ = http_get(url + "/health", timeout=2.0)
            except (OSError, urllib.error.URLError):
                status = 0
            if status == 200 and self._port_is_ours():
                break
            if time.monotonic() > deadline:
                self.failed_at = time.monotonic()
                self.stop(port_was_ours=self._port_is_ours())  # never wait for another's port
                raise StartFailure(
                    "timeout",
                    f"/health did not answer 200 within {timeout:.0f} s",
                    self.log_tail(),
                    None,
                    self.read_log(time.monotonic() + FAILED_READ_S).get("vllm_version"),
                )
            if on_poll:
                on_poll(time.monotonic() - self.started_at)
            time.sleep(HEALTH_POLL_S)
        self.healthy_at = time.monotonic()
        healthy_s = round(self.healthy_at - self.started_at, 3)
        if self.stamps is not None and self.sheet is not None:  # what was written since its read
            stamps = self.stamps.stop(until_s=healthy_s, deadline=deadline)
            sheet = self.sheet
        else:
            stamps, sheet = {}, self.read_log(deadline)
        if not sheet.complete:
            self.stop()
            raise StartFailure(
                "timeout",
                f"/health answered 200 after {healthy_s:.0f} s, but reading the server log "
                f"({sheet.bytes_read / 1e6:.0f} MB so far) did not end within {timeout:.0f} s",
                self.log_tail(),
                None,
                sheet.get("vllm_version"),
            )
        healthy_s, stamps = self.startup_times(healthy_s, stamps)
        self.facts = startup_facts(sheet)
        self.facts.time_to_healthy_s = healthy_s
        self.facts.anatomy = anatomy(stamps, healthy_s, sheet)
        try:
            left = max(1.0, min(5.0, deadline - time.monotonic()))
            _, metrics = http_get(url + "/metrics", timeout=left)
            apply_cache_config(self.facts, parse_cache_config(metrics))
        except (OSError, urllib.error.URLError, ValueError):
            pass
        return self.facts

    def _port_is_ours(self) -> bool:
        """Whether the listener that answered is ours (in our process group, or a descendant of
        our server that left it): on a shared machine another server can take the port between
        our check and our engine's bind (a slow start binds late), and its /health and /metrics
        must not pass for ours. True when the holders cannot be seen (no permission)."""
        holders = port_holders(self.launch.port)
        if not holders or self.proc is None:
            return True
        for pid in holders:
            try:
                if os.getpgid(pid) == self.pgid:
                    return True
                if any(p.pid == self.proc.pid for p in psutil.Process(pid).parents()):
                    return True
            except (OSError, psutil.Error):
                continue
        return False

    def alive(self) -> bool:
        """Our own child, so `poll()` both answers and reaps it (no zombie is left behind)."""
        return self.proc is not None and self.proc.poll() is None

    def stop(
        self,
        grace: float = 15.0,
        timeout: float = 60.0,
        port_was_ours: bool = True,
        wait_port: bool = True,
    ) -> None:
        """SIGTERM the group; once the leader has exited (or after `grace`), SIGKILL whatever is
        left after STRAGGLER_GRACE_S; return once it is gone and the port is free (with
        `wait_port=False`, once it is gone: the caller then calls `wait_port_released`).

        A second call is a no-op: the group id may belong to someone else by then. StopFailure
        when a process outlives SIGKILL or the port stays held by one of ours.
        """
        if self.proc is None or self.pgid is None or self._stopped:
            return
        if self.stamps is not None:  # a start that failed or was cancelled: stop following
            self.stamps.stop(deadline=time.monotonic())
        try:  # children that left the group (setsid) are still ours to stop
            tree = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        try:
            os.killpg(self.pgid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        continue_group(self.pgid)  # a paused resident server acts on SIGTERM only once continued
        deadline = time.monotonic() + grace
        while self.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            stop_group(self.pgid, grace=min(grace, STRAGGLER_GRACE_S), timeout=timeout)
        except RuntimeError as exc:
            raise StopFailure(str(exc)) from exc
        finally:
            for child in tree:
                try:
                    child.kill()
                    child.wait(timeout=10)
                except psutil.Error:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._stopped = True
        ipc_dir.remove(self.ipc_dir)  # the group is gone (a survivor raised above: swept later)
        if port_was_ours and wait_port:
            self.wait_port_released(timeout)

    def wait_port_released(self, timeout: float = 60.0) -> None:
        """Wait until the port is free; a listener that was there before our server started is
        someone else's (never signalled, never waited for)."""
        deadline = time.monotonic() + timeout
        born = self.start_time or 0.0
        while not port_is_free(self.launch.host, self.launch.port):
            holders = port_holders(self.launch.port)
            if holders and all(started < born - 1.0 for started in holders.values()):
                return
            if time.monotonic() > deadline:
                raise StopFailure(
                    f"port {self.launch.port} still busy {timeout:.0f} s after stop "
                    f"(held by {describe_holders(self.launch.port)})"
                )
            time.sleep(0.2)
