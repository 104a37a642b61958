"""Background samplers for one run: the server's process tree, its GPU memory, its /metrics.

Each sampler runs in its own daemon thread at its own period and turns what it sees into
`SampleRow`s (t = seconds since a monotonic origin the caller chooses, usually the server's start).
A `Telemetry` recorder owns the threads, buffers the rows and hands them to one sink in batches from
one flusher thread, so the runner can write SQLite while the live page reads it, and the memory
climb is recorded during the run rather than as one snapshot after it.

Only the standard library, psutil and prometheus_client are imported at module level; NVML
(`pynvml` from nvidia-ml-py) is imported lazily so a machine without a driver still samples the rest.
This module must stay importable on the GPU test machine, which has no sqlite-utils or Streamlit.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psutil
from prometheus_client.parser import text_string_to_metric_families

from core.records import SampleRow
from tuning.procs import pid_alive

log = logging.getLogger(__name__)

Sink = Callable[[list[SampleRow]], None]

GIB = 1 << 30
MIB = 1 << 20


# --------------------------------------------------------------------------------------------
# Process tree
# --------------------------------------------------------------------------------------------

_API_SERVER_MARKERS = ("vllm.entrypoints", "vllm/entrypoints")


def process_name(cmdline: Sequence[str], comm: str = "") -> str:
    """A short, stable role name for a vLLM process: "EngineCore", "Worker_TP0", "APIServer".

    vLLM titles its children with setproctitle ("VLLM::EngineCore", the prefix is
    VLLM_PROCESS_NAME_PREFIX), which shows up as cmdline[0]; the launcher itself keeps its python
    command line, recognised here as the API server. Anything else falls back to `comm`.
    """
    first = cmdline[0].strip() if cmdline else ""
    if "::" in first:
        title = first.split("::", 1)[1].split()
        if title:
            return title[0]
    if any(marker in arg for arg in cmdline[:4] for marker in _API_SERVER_MARKERS):
        return "APIServer"
    if len(cmdline) >= 2 and os.path.basename(cmdline[0]) == "vllm" and cmdline[1] == "serve":
        return "APIServer"
    if (
        len(cmdline) >= 3 and os.path.basename(cmdline[1]) == "vllm" and cmdline[2] == "serve"
    ):  # python /path/bin/vllm serve ...
        return "APIServer"
    if "::" in comm:  # comm is truncated to 15 chars but still useful
        return comm.split("::", 1)[1] or comm
    return comm or (os.path.basename(first) if first else "proc")


def _has_children_file() -> bool:
    pid = os.getpid()
    return os.path.exists(f"/proc/{pid}/task/{pid}/children")


_HAS_PROC_STAT = os.path.exists(f"/proc/{os.getpid()}/stat")
_CLK_TCK = os.sysconf("SC_CLK_TCK") if _HAS_PROC_STAT else 100
_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if _HAS_PROC_STAT else 4096


class ProcessTree:
    """The live set of processes under a root pid, and their RSS and CPU, cheap at 100 ms.

    psutil's `children(recursive=True)` reads /proc/*/stat of every process on the machine, and
    psutil's memory_info() + cpu_percent() open two /proc files per process: ~1.5 ms per sample for
    a 4-process tree here. Instead, on Linux, each process's /proc/<pid>/stat and its main thread's
    /proc/<pid>/task/<pid>/children are opened once and re-read with pread (one syscall each,
    ~0.4 ms per sample in all). An open /proc fd stays bound to its process, so a reused pid can
    never be mistaken for a member: reads fail with ESRCH once the process is reaped.
    The children files see children forked by each process's main thread; a psutil scan every
    `rescan_every` seconds catches children forked by other threads. Elsewhere psutil does it all,
    with psutil.Process objects cached by pid so cpu_percent() has a previous reading.
    Membership is sticky: a process seen once stays a member until it exits, so an EngineCore
    orphaned by a crashed API server (reparented to init) is still counted while it holds memory.
    Not thread-safe: one tree per sampler thread.
    """

    def __init__(self, root_pid: int, rescan_every: float = 1.0) -> None:
        self.root_pid = root_pid
        self.rescan_every = rescan_every
        self._fast_children = _has_children_file()
        self._fast_stat = _HAS_PROC_STAT
        self._members: set[int] = set()
        self._last_scan = -math.inf
        self._stat_fd: dict[int, int] = {}
        self._child_fd: dict[int, int] = {}
        self._cpu_last: dict[int, tuple[float, float]] = {}  # pid -> (cpu seconds, monotonic)
        self._procs: dict[int, psutil.Process] = {}
        self._labels: dict[int, str] = {}
        self._label_final: set[int] = set()
        self._label_at: dict[int, float] = {}

    # low level ------------------------------------------------------------------------------
    @staticmethod
    def _pread(fds: dict[int, int], pid: int, path: str) -> bytes | None:
        fd = fds.get(pid)
        if fd is None:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
            fds[pid] = fd
        try:
            return os.pread(fd, 65536, 0)
        except OSError:  # ESRCH: that process is gone
            return None

    def _proc(self, pid: int) -> psutil.Process | None:
        proc = self._procs.get(pid)
        if proc is None:
            try:
                proc = psutil.Process(pid)
            except psutil.Error:
                return None
            self._procs[pid] = proc
        return proc

    def _walk_main_threads(self) -> set[int]:
        found = {self.root_pid}
        stack = [self.root_pid]
        while stack:
            pid = stack.pop()
            data = self._pread(self._child_fd, pid, f"/proc/{pid}/task/{pid}/children")
            if not data:
                continue
            for token in data.split():
                child = int(token)
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _full_scan(self) -> set[int]:
        try:
            root = psutil.Process(self.root_pid)
            return {self.root_pid} | {c.pid for c in root.children(recursive=True)}
        except psutil.Error:
            return set()

    def _alive(self, pid: int) -> bool:
        """Still the same process we saw before (not a reused pid)?"""
        if self._fast_stat and pid in self._stat_fd:
            return self._pread(self._stat_fd, pid, f"/proc/{pid}/stat") is not None
        proc = self._procs.get(pid)
        try:
            return proc is not None and proc.is_running()
        except psutil.Error:
            return False

    # public ---------------------------------------------------------------------------------
    def refresh(self) -> set[int]:
        """Current member pids (root included while it lives); empty once all have exited."""
        found: set[int] = set()
        root_alive = self.root_pid > 0 and (
            self._alive(self.root_pid)
            if self.root_pid in self._members
            else pid_alive(self.root_pid)
        )
        if root_alive:
            now = time.monotonic()
            if self._fast_children:
                found = self._walk_main_threads()
            if not self._fast_children or now - self._last_scan >= self.rescan_every:
                found |= self._full_scan()
                self._last_scan = now
        for pid in found - self._members:  # pin each new member's identity now
            if self._fast_stat:
                self._pread(self._stat_fd, pid, f"/proc/{pid}/stat")
            else:
                self._proc(pid)
        for pid in self._members - found:
            if self._alive(pid):
                found.add(pid)
            else:
                self.forget(pid)
        self._members = found
        return set(found)

    def read(self, pid: int) -> tuple[int, float] | None:
        """(RSS bytes, CPU percent of one core since the last read; 0 the first time), or None
        when the process is gone or unreadable (unknown is skipped, never written as 0)."""
        now = time.monotonic()
        if self._fast_stat:
            data = self._pread(self._stat_fd, pid, f"/proc/{pid}/stat")
            if data is None:
                return None
            try:
                fields = data[data.rindex(b")") + 2 :].split()
                cpu_s = (int(fields[11]) + int(fields[12])) / _CLK_TCK  # utime + stime
                rss = int(fields[21]) * _PAGE_SIZE
            except (ValueError, IndexError):
                return None
            last = self._cpu_last.get(pid)
            self._cpu_last[pid] = (cpu_s, now)
            if last is None or now <= last[1]:
                return rss, 0.0
            return rss, max(0.0, 100.0 * (cpu_s - last[0]) / (now - last[1]))
        proc = self._proc(pid)
        if proc is None:
            return None
        try:
            return proc.memory_info().rss, proc.cpu_percent(None)
        except psutil.Error:
            return None

    def forget(self, pid: int) -> None:
        """Drop a pid that exited: its fds, cached Process, CPU reading and label."""
        for fds in (self._stat_fd, self._child_fd):
            fd = fds.pop(pid, None)
            if fd is not None:
                os.close(fd)
        self._members.discard(pid)
        self._procs.pop(pid, None)
        self._cpu_last.pop(pid, None)
        self._labels.pop(pid, None)
        self._label_final.discard(pid)
        self._label_at.pop(pid, None)

    def close(self) -> None:
        """Close every cached /proc fd (the tree can be refreshed again afterwards)."""
        for pid in list(self._stat_fd) + list(self._child_fd):
            self.forget(pid)
        self._members.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def label(self, pid: int) -> str:
        """ "<name>:<pid>", re-derived about once a second until vLLM has set the process title."""
        now = time.monotonic()
        if pid in self._label_final or (pid in self._labels and now - self._label_at[pid] < 1.0):
            return self._labels[pid]
        name = "proc"
        proc = self._proc(pid)
        if proc is not None:
            try:
                cmdline = proc.cmdline()
            except psutil.Error:
                cmdline = []
            try:
                comm = proc.name()
            except psutil.Error:
                comm = ""
            name = process_name(cmdline, comm)
            if (cmdline and "::" in cmdline[0]) or name == "APIServer":
                self._label_final.add(pid)
        label = f"{name}:{pid}"
        self._labels[pid] = label
        self._label_at[pid] = now
        return label


# --------------------------------------------------------------------------------------------
# Samplers
# --------------------------------------------------------------------------------------------


class Sampler:
    """One source of samples. `Telemetry` calls open() once, sample(t) every `period`, close() once,
    all from the sampler's own thread; each may also be called directly (tests, one-off reads)."""

    name = "sampler"

    def __init__(self, period: float) -> None:
        if period <= 0:
            raise ValueError("period must be > 0")
        self.period = period

    def open(self) -> None:
        """Acquire what sampling needs (a library handle); never raises for a missing resource."""

    def sample(self, t: float) -> list[SampleRow]:
        raise NotImplementedError

    def close(self) -> None:
        """Release what open() acquired."""


class ProcessTreeSampler(Sampler):
    """Resident memory and CPU of the server's whole process tree.

    Series: "tree_rss_bytes" (label ""), "proc_rss_bytes" (label "<name>:<pid>"), "tree_cpu_percent"
    (label "", percent of one core summed over the tree; a process's first reading counts 0).
    RSS, not USS/PSS: RSS is one field of /proc/<pid>/stat and costs microseconds, while USS/PSS
    need /proc/<pid>/smaps_rollup, a page-table walk that takes milliseconds on a process with
    large (e.g. CUDA) mappings. RSS counts shared pages (libraries, fork-shared memory) once per
    process, so the tree sum overstates the private total by the shared part; it is the number
    people compare with `ps`/`top`, and its climb during a run is what matters here.
    Measured cost at 100 ms (own thread CPU, 1 s rescan included): ~0.7-1.0% of one core for a
    4-process tree with 300 threads on the 2-core dev box, 0.6% on the H200 test machine.
    """

    name = "process_tree"

    def __init__(self, root_pid: int, period: float = 0.1, rescan_every: float = 1.0) -> None:
        super().__init__(period)
        self.tree = ProcessTree(root_pid, rescan_every=rescan_every)

    @property
    def root_pid(self) -> int:
        return self.tree.root_pid

    def sample(self, t: float) -> list[SampleRow]:
        rows: list[SampleRow] = []
        total_rss = 0
        total_cpu = 0.0
        for pid in sorted(self.tree.refresh()):
            reading = self.tree.read(pid)
            if reading is None:
                continue
            rss, cpu = reading
            total_rss += rss
            total_cpu += cpu
            rows.append(SampleRow(t, "proc_rss_bytes", float(rss), self.tree.label(pid)))
        if rows:
            rows.append(SampleRow(t, "tree_rss_bytes", float(total_rss), ""))
            rows.append(SampleRow(t, "tree_cpu_percent", float(total_cpu), ""))
        return rows

    def close(self) -> None:
        self.tree.close()


# NVML --------------------------------------------------------------------------------------

# One lock around every NVML call in this process: the library handle is shared by all samplers.
_NVML_LOCK = threading.RLock()
_UNSUPPORTED = {"NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound"}


def _load_nvml(nvml: Any | None) -> Any:
    """The NVML module: the one given (tests), else `import pynvml` (nvidia-ml-py), lazily."""
    if nvml is not None:
        return nvml
    import pynvml  # noqa: PLC0415  (lazy on purpose: no driver, no library -> caller degrades)

    return pynvml


class _Nvml:
    """One nvmlInit/nvmlShutdown pair and the device handles, under the module lock."""

    def __init__(self, nvml: Any | None = None) -> None:
        self._injected = nvml
        self.mod: Any = None
        self.handles: list[Any] = []
        self.error: str | None = None
        self._inited = False

    def init(self) -> bool:
        if self._inited:
            return True
        with _NVML_LOCK:
            try:
                mod = _load_nvml(self._injected)
                mod.nvmlInit()
            except Exception as exc:  # ImportError, NVMLError_LibraryNotFound, DriverNotLoaded...
                self.error = f"{type(exc).__name__}: {exc}"
                return False
            try:
                count = int(mod.nvmlDeviceGetCount())
                handles = [mod.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            except Exception as exc:
                self.error = f"{type(exc).__name__}: {exc}"
                try:
                    mod.nvmlShutdown()
                except Exception:
                    pass
                return False
            self.mod, self.handles, self._inited = mod, handles, True
            self.error = None if handles else "no GPU device visible to NVML"
            return bool(handles)

    def used_bytes(self) -> dict[str, int]:
        with _NVML_LOCK:
            return {
                f"gpu{i}": int(self.mod.nvmlDeviceGetMemoryInfo(h).used)
                for i, h in enumerate(self.handles)
            }

    def shutdown(self) -> None:
        if not self._inited:
            return
        with _NVML_LOCK:
            try:
                self.mod.nvmlShutdown()
            except Exception as exc:
                log.debug("nvmlShutdown failed: %s", exc)
        self._inited = False
        self.handles = []


def read_gpu_used(nvml: Any | None = None) -> dict[str, int]:
    """Device-level used memory now, {"gpu0": bytes, ...}; {} without NVML or a GPU."""
    lib = _Nvml(nvml)
    if not lib.init():
        return {}
    try:
        return lib.used_bytes()
    except Exception as exc:
        log.warning("NVML memory read failed: %s", exc)
        return {}
    finally:
        lib.shutdown()


def wait_gpu_memory_released(
    baseline: Mapping[str, int],
    tolerance: int = 512 * MIB,
    timeout: float = 60.0,
    poll: float = 0.5,
    nvml: Any | None = None,
) -> bool:
    """Wait until every device's used memory is back within `tolerance` of `baseline`.

    The runner calls this between runs (as vLLM's tests do with NVML) so the next server does not
    start while the previous one's memory is still held. True when released, False on timeout;
    also True when NVML is unavailable (no GPU means no GPU memory to wait for), which is logged.
    """
    lib = _Nvml(nvml)
    if not lib.init():
        log.info("GPU memory release not checked: NVML unavailable (%s)", lib.error)
        return True
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                used = lib.used_bytes()
            except Exception as exc:
                log.warning("NVML memory read failed while waiting for release: %s", exc)
                used = {}
            if used and all(v <= baseline.get(k, 0) + tolerance for k, v in used.items()):
                return True
            if time.monotonic() >= deadline:
                over = {k: v - baseline.get(k, 0) for k, v in used.items()}
                log.warning("GPU memory not released after %.0f s: over baseline %s", timeout, over)
                return False
            time.sleep(poll)
    finally:
        lib.shutdown()


class GpuSampler(Sampler):
    """GPU memory through NVML, device-level and attributed to the server's process tree.

    Series: "gpu_used_bytes" (label "gpu<i>", NVML index; NVML ignores CUDA_VISIBLE_DEVICES),
    "gpu_util_percent" ("gpu<i>"), "gpu_proc_bytes" ("<name>:<pid>", per tree process, summed over
    devices), "gpu_tree_bytes" ("gpu<i>", the tree's sum on that device).
    vLLM's memory lives in EngineCore/Worker children, not in the launched pid, hence the tree.
    Unknown is never written as 0: a process whose usedGpuMemory is None is skipped, and when the
    device has compute processes but none of their pids exist here (container PID namespace: NVML
    reports host pids) the tree sum is not written; use gpu_used_bytes - baseline instead.
    Without NVML or a GPU, `available` is False after open(), one warning is logged and sample()
    returns []. It never raises.
    """

    name = "gpu"

    def __init__(
        self,
        root_pid: int | None = None,
        period: float = 0.1,
        nvml: Any | None = None,
        rescan_every: float = 1.0,
    ) -> None:
        super().__init__(period)
        self._lib = _Nvml(nvml)
        self._rescan_every = rescan_every
        self._tree: ProcessTree | None = None
        self.root_pid = root_pid
        self.available: bool | None = None  # None until open()/baseline() tried NVML
        self.unavailable_reason: str | None = None
        self.baseline_used: dict[str, int] = {}
        self.errors = 0
        self._warned: set[str] = set()
        self._util_ok = True
        self._procs_ok = True

    @property
    def root_pid(self) -> int | None:
        return self._root_pid

    @root_pid.setter
    def root_pid(self, pid: int | None) -> None:
        """Set after launch when baseline() was taken before the server existed."""
        self._root_pid = pid
        self._tree = None if pid is None else ProcessTree(pid, self._rescan_every)

    def _warn_once(self, key: str, msg: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    def open(self) -> None:
        if self.available:
            return
        self.available = self._lib.init()
        if not self.available:
            self.unavailable_reason = self._lib.error
            self._warn_once(
                "unavailable", "GPU sampling off: NVML unavailable (%s)", self._lib.error
            )

    def baseline(self) -> dict[str, int]:
        """Record and return device used memory now (call before launching the server)."""
        self.open()
        if not self.available:
            return {}
        try:
            self.baseline_used = self._lib.used_bytes()
        except Exception as exc:
            self.errors += 1
            self._warn_once("baseline", "NVML baseline read failed: %s", exc)
        return dict(self.baseline_used)

    def close(self) -> None:
        self._lib.shutdown()
        if self._tree is not None:
            self._tree.close()
        if self.available:
            self.available = None

    def _optional(self, key: str, exc: Exception) -> bool:
        """True when `exc` says the call is unsupported here: warn once and stop calling it."""
        if type(exc).__name__ in _UNSUPPORTED:
            self._warn_once(key, "NVML %s not supported on this device/driver: %s", key, exc)
            return True
        self.errors += 1
        self._warn_once(key + "-error", "NVML %s failed (counted, sampling goes on): %s", key, exc)
        return False

    def sample(self, t: float) -> list[SampleRow]:
        if self.available is None:
            self.open()
        if not self.available:
            return []
        rows: list[SampleRow] = []
        tree_pids = self._tree.refresh() if self._tree is not None else set()
        proc_bytes: dict[int, int] = {}
        mod = self._lib.mod
        with _NVML_LOCK:
            for i, handle in enumerate(self._lib.handles):
                dev = f"gpu{i}"
                try:
                    rows.append(
                        SampleRow(
                            t,
                            "gpu_used_bytes",
                            float(mod.nvmlDeviceGetMemoryInfo(handle).used),
                            dev,
                        )
                    )
                except Exception as exc:
                    self.errors += 1
                    self._warn_once("memory", "NVML memory read failed: %s", exc)
                if self._util_ok:
                    try:
                        util = mod.nvmlDeviceGetUtilizationRates(handle).gpu
                        rows.append(SampleRow(t, "gpu_util_percent", float(util), dev))
                    except Exception as exc:
                        if self._optional("utilization", exc):
                            self._util_ok = False
                if not self._procs_ok or self._tree is None:
                    continue
                try:
                    running = mod.nvmlDeviceGetComputeRunningProcesses(handle)
                except Exception as exc:
                    if self._optional("compute processes", exc):
                        self._procs_ok = False
                    continue
                ours_known = False
                ours_seen = False
                tree_sum = 0
                foreign = []
                for info in running:
                    pid = int(info.pid)
                    if pid not in tree_pids:
                        foreign.append(pid)
                        continue
                    ours_seen = True
                    used = info.usedGpuMemory
                    if used is None:  # NVML_VALUE_NOT_AVAILABLE: unknown, not 0
                        self._warn_once(
                            "used-none",
                            "NVML reports no per-process memory for "
                            "pid %s (usedGpuMemory None): skipped",
                            pid,
                        )
                        continue
                    ours_known = True
                    tree_sum += int(used)
                    proc_bytes[pid] = proc_bytes.get(pid, 0) + int(used)
                if ours_known:
                    rows.append(SampleRow(t, "gpu_tree_bytes", float(tree_sum), dev))
                elif not ours_seen:
                    if foreign and not any(pid_alive(p) for p in foreign):
                        self._warn_once(
                            "pidns",
                            "NVML pids %s do not exist in this PID "
                            "namespace (container?): per-process GPU memory is "
                            "unknown; use gpu_used_bytes - baseline",
                            foreign[:4],
                        )
                    else:
                        rows.append(SampleRow(t, "gpu_tree_bytes", 0.0, dev))
        if self._tree is not None:
            for pid, used in sorted(proc_bytes.items()):
                rows.append(SampleRow(t, "gpu_proc_bytes", float(used), self._tree.label(pid)))
        return rows


# /metrics -----------------------------------------------------------------------------------

# Exposed name without "vllm:" and without "_total" -> series. Counters keep "_total" in the series
# name because that is the name people grep for in /metrics.
METRIC_SERIES: dict[str, str] = {
    "kv_cache_usage_perc": "kv_cache_usage_perc",
    "num_requests_running": "num_requests_running",
    "num_requests_waiting": "num_requests_waiting",
    "num_preemptions": "num_preemptions_total",
    "prefix_cache_queries": "prefix_cache_queries_total",
    "prefix_cache_hits": "prefix_cache_hits_total",
    "prompt_tokens": "prompt_tokens_total",
    "generation_tokens": "generation_tokens_total",
    "request_success": "request_success_total",
}
# Older names, used only when the current one is absent (V0 / early V1).
METRIC_ALIASES: dict[str, str] = {"gpu_cache_usage_perc": "kv_cache_usage_perc"}
# Fractions are averaged over engines (DP); counts and counters are summed.
AVERAGED_SERIES = frozenset({"kv_cache_usage_perc"})


def _base_name(name: str) -> str:
    base = name[5:] if name.startswith("vllm:") else name
    return base[:-6] if base.endswith("_total") else base


def parse_vllm_metrics(text: str) -> dict[str, float]:
    """The lab's series from a /metrics text: summed over `engine`, `finished_reason` and any other
    label (kv_cache_usage_perc averaged over engines, kept raw 0..1).

    prometheus_client's parser names a counter family without "_total" and, when the TYPE line and
    the sample disagree, splits them into separate families, so this keys on each *sample's* name
    ("vllm:num_preemptions_total"), stripping "vllm:" and "_total"; "_created" samples are ignored.
    Lines of other metrics (histogram buckets are most of the text) are dropped before parsing.
    """
    wanted = set(METRIC_SERIES) | set(METRIC_ALIASES)
    kept = []
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if _base_name(name) in wanted:
            kept.append(line)
    if not kept:
        return {}
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    aliased: dict[str, float] = {}
    alias_counts: dict[str, int] = {}
    for family in text_string_to_metric_families("\n".join(kept) + "\n"):
        for sample in family.samples:
            base = _base_name(sample.name)
            value = float(sample.value)
            if math.isnan(value):
                continue
            if base in METRIC_SERIES:
                series = METRIC_SERIES[base]
                sums[series] = sums.get(series, 0.0) + value
                counts[series] = counts.get(series, 0) + 1
            elif base in METRIC_ALIASES:
                series = METRIC_ALIASES[base]
                aliased[series] = aliased.get(series, 0.0) + value
                alias_counts[series] = alias_counts.get(series, 0) + 1
    for series, value in aliased.items():
        if series not in sums:
            sums[series], counts[series] = value, alias_counts[series]
    for series in AVERAGED_SERIES & set(sums):
        sums[series] /= counts[series]
    return sums


class MetricsSampler(Sampler):
    """vLLM's own view of the run from GET <base_url>/metrics: KV cache usage, queue, preemptions,
    prefix cache and token counters. Failures (refused, timeout, bad text) are counted in `failures`
    with the last one in `last_error`, never raised: a server under load may answer late.
    Proxies are bypassed (the server is local); the period is 0.5 s by default because every
    scrape makes the API server render its whole registry.
    """

    name = "metrics"

    def __init__(
        self,
        base_url: str,
        period: float = 0.5,
        timeout: float = 2.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(period)
        self.url = base_url.rstrip("/") + "/metrics"
        self.timeout = timeout
        self._headers = dict(headers or {})
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.scrapes = 0
        self.failures = 0
        self.last_error: str | None = None

    def fetch(self) -> str:
        req = urllib.request.Request(self.url, headers=self._headers)
        with self._opener.open(req, timeout=self.timeout) as resp:
            return resp.read().decode("utf-8", "replace")

    def sample(self, t: float) -> list[SampleRow]:
        self.scrapes += 1
        try:
            values = parse_vllm_metrics(self.fetch())
        except (OSError, urllib.error.URLError, ValueError) as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return []
        return [SampleRow(t, series, value, "") for series, value in values.items()]


# --------------------------------------------------------------------------------------------
# Peaks
# --------------------------------------------------------------------------------------------

# Series summed over their labels at one instant before taking the max (several GPUs).
_SUMMED_AT_T = ("gpu_used_bytes", "gpu_tree_bytes")
_MAXED = {
    "tree_rss_bytes": "peak_tree_rss_bytes",
    "tree_cpu_percent": "peak_tree_cpu_percent",
    "kv_cache_usage_perc": "peak_kv_cache_usage_perc",
    "num_requests_running": "max_num_requests_running",
    "num_requests_waiting": "max_num_requests_waiting",
}
_DELTAS = {
    "num_preemptions_total": "preemptions",
    "generation_tokens_total": "generation_tokens_delta",
    "prompt_tokens_total": "prompt_tokens_delta",
    "request_success_total": "request_success_delta",
    "prefix_cache_queries_total": "prefix_cache_queries_delta",
    "prefix_cache_hits_total": "prefix_cache_hits_delta",
}
_MEMORY_KEYS = ("peak_tree_rss_bytes", "peak_gpu_used_bytes", "peak_gpu_tree_bytes")
PEAK_KEYS: tuple[str, ...] = (
    "peak_tree_rss_bytes",
    "peak_tree_cpu_percent",
    "peak_gpu_used_bytes",
    "peak_gpu_used_over_baseline_bytes",
    "peak_gpu_tree_bytes",
    "load_peak_tree_rss_bytes",
    "load_peak_gpu_used_bytes",
    "load_peak_gpu_tree_bytes",
    "peak_kv_cache_usage_perc",
    "max_num_requests_running",
    "max_num_requests_waiting",
    *_DELTAS.values(),
    "prefix_cache_hit_rate",
)


class PeakTracker:
    """Running peaks and counter deltas, fed in time order; O(1) memory for long runs."""

    def __init__(self) -> None:
        self._max: dict[str, float] = {}
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._acc: dict[str, tuple[float, float]] = {}  # series -> (t, running sum at t)

    def _bump(self, series: str, value: float) -> None:
        if value > self._max.get(series, -math.inf):
            self._max[series] = value

    def add(self, rows: Iterable[SampleRow]) -> None:
        for row in rows:
            s = row.series
            if s in _SUMMED_AT_T:
                t_sum = self._acc.get(s)
                if t_sum is not None and t_sum[0] == row.t:
                    self._acc[s] = (row.t, t_sum[1] + row.value)
                else:
                    if t_sum is not None:
                        self._bump(s, t_sum[1])
                    self._acc[s] = (row.t, row.value)
            elif s in _MAXED:
                self._bump(s, row.value)
            elif s in _DELTAS:
                self._first.setdefault(s, row.value)
                self._last[s] = row.value

    def result(self, gpu_baseline: Mapping[str, int] | None = None) -> dict[str, float | None]:
        """All of PEAK_KEYS, None where the run had no such samples."""
        maxes = dict(self._max)
        for s, (_, acc) in self._acc.items():
            if acc > maxes.get(s, -math.inf):
                maxes[s] = acc
        out: dict[str, float | None] = dict.fromkeys(PEAK_KEYS)
        for series, key in _MAXED.items():
            out[key] = maxes.get(series)
        out["peak_gpu_used_bytes"] = maxes.get("gpu_used_bytes")
        out["peak_gpu_tree_bytes"] = maxes.get("gpu_tree_bytes")
        if gpu_baseline and out["peak_gpu_used_bytes"] is not None:
            out["peak_gpu_used_over_baseline_bytes"] = out["peak_gpu_used_bytes"] - float(
                sum(gpu_baseline.values())
            )
        for series, key in _DELTAS.items():
            if series in self._last:
                out[key] = self._last[series] - self._first[series]
        _hit_rate(out)
        return out


def _hit_rate(out: dict[str, float | None]) -> None:
    queries = out["prefix_cache_queries_delta"]
    hits = out["prefix_cache_hits_delta"]
    out["prefix_cache_hit_rate"] = (
        hits / queries if queries and hits is not None and queries > 0 else None
    )


def peaks(
    rows: Iterable[SampleRow],
    gpu_baseline: Mapping[str, int] | None = None,
    window: tuple[float, float] | None = None,
) -> dict[str, float | None]:
    """Peaks of a run's samples, in any order; every key of PEAK_KEYS, None where unknown.

    Memory peaks (tree RSS; device and tree GPU memory, summed over GPUs at each instant) span all
    rows, so the startup peak (weights, KV allocation, profiling) counts. With `window` = the load's
    (start, end) in the rows' t: the load-driven keys (CPU, KV usage, max running/waiting, counter
    deltas, prefix cache hit rate) are taken inside it, counter deltas from the last sample at or
    before its start to the first at or after its end (so a scrape period at either edge is not
    lost), and load_peak_* give the memory peaks inside it. Without a window the whole run counts
    and load_peak_* are None. Deltas are last - first of vLLM's cumulative counters; the hit rate
    is delta hits / delta queries (tokens). Over-baseline assumes every sample covers the devices
    in `gpu_baseline`.
    """
    ordered = sorted(rows, key=lambda r: r.t)
    tracker = PeakTracker()
    tracker.add(ordered)
    out = tracker.result(gpu_baseline)
    if window is None:
        return out
    w0, w1 = window
    inside = [r for r in ordered if w0 <= r.t <= w1]
    in_tracker = PeakTracker()
    in_tracker.add(inside)
    win = in_tracker.result(gpu_baseline)
    for key in (
        "peak_tree_cpu_percent",
        "peak_kv_cache_usage_perc",
        "max_num_requests_running",
        "max_num_requests_waiting",
    ):
        out[key] = win[key]
    for key in _MEMORY_KEYS:
        out["load_" + key] = win[key]
    for series, key in _DELTAS.items():
        values = [r for r in ordered if r.series == series]
        before = [r.value for r in values if r.t <= w0]
        after = [r.value for r in values if r.t >= w1]
        during = [r.value for r in values if w0 <= r.t <= w1]
        first = before[-1] if before else (during[0] if during else None)
        last = after[0] if after else (during[-1] if during else None)
        out[key] = None if first is None or last is None else last - first
    _hit_rate(out)
    return out


# --------------------------------------------------------------------------------------------
# Recorder
# --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class SamplerStats:
    """What one sampler thread did; cpu_seconds is that thread's own CPU time (time.thread_time)."""

    name: str
    period: float
    samples: int = 0
    rows: int = 0
    errors: int = 0
    missed_ticks: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    last_error: str | None = None

    @property
    def cpu_percent(self) -> float:
        """Percent of one core the sampler itself used while running."""
        return 100.0 * self.cpu_seconds / self.wall_seconds if self.wall_seconds > 0 else 0.0


class Telemetry:
    """Runs samplers in daemon threads (one each, drift-free ticks at start + k*period), buffers
    their rows and calls `sink` with batches from a single flusher thread every `flush_every`
    seconds; the sink is never called from two threads (a SQLite connection it uses needs
    check_same_thread=False only because it was opened elsewhere). A sink that raises keeps its
    batch for the next flush (bounded by `max_pending`). flush() pushes everything recorded so far
    through the sink and waits for it; stop() joins, flushes the rest and returns `peaks()`.
    One recorder per server life: samplers can be added while it runs (add()), not restarted.
    """

    def __init__(self, origin: float | None = None, max_pending: int = 200_000) -> None:
        self.max_pending = max_pending
        self.origin: float = time.monotonic() if origin is None else origin
        self.sink_errors = 0
        self.dropped_rows = 0
        self._samplers: list[Sampler] = []
        self._stats: dict[str, SamplerStats] = {}
        self._threads: list[threading.Thread] = []
        self._flusher: threading.Thread | None = None
        self._buffer: list[SampleRow] = []
        self._pending: list[SampleRow] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._requested = 0
        self._served = 0
        self._wake = threading.Event()
        self._stop_sampling = threading.Event()
        self._stop_flushing = threading.Event()
        self._tracker = PeakTracker()
        self._sink: Sink | None = None
        self._flush_every = 1.0
        self._started = False

    @property
    def running(self) -> bool:
        return self._started and not self._stop_sampling.is_set()

    def start(
        self,
        samplers: Sequence[Sampler],
        sink: Sink | None = None,
        flush_every: float = 1.0,
        *,
        origin: float | None = None,
    ) -> None:
        """Start sampling now; t of every row is time.monotonic() - origin (default: the origin
        given to the constructor, else the time the recorder was made)."""
        if self._started:
            raise RuntimeError("Telemetry already started; make a new one per run")
        self._started = True
        if origin is not None:
            self.origin = origin
        self._sink = sink
        self._flush_every = flush_every
        self._flusher = threading.Thread(
            target=self._run_flusher, name="telemetry-flush", daemon=True
        )
        self._flusher.start()
        for sampler in samplers:
            self.add(sampler)

    def add(self, sampler: Sampler) -> None:
        """Start one more sampler on a running recorder (e.g. /metrics once the server is up)."""
        if not self._started:
            raise RuntimeError("start() the recorder first")
        with self._lock:
            if self._stop_sampling.is_set():
                log.warning("telemetry: %s added after stop; ignored", sampler.name)
                return
            key, n = sampler.name, 1
            while key in self._stats:
                key, n = f"{sampler.name}#{n}", n + 1
            stats = SamplerStats(key, sampler.period)
            thread = threading.Thread(
                target=self._run_sampler,
                args=(sampler, stats),
                name=f"telemetry-{key}",
                daemon=True,
            )
            self._samplers.append(sampler)
            self._stats[key] = stats
            self._threads.append(thread)
            thread.start()

    def _run_sampler(self, sampler: Sampler, stats: SamplerStats) -> None:
        cpu0 = time.thread_time()
        wall0 = time.monotonic()
        try:
            sampler.open()
        except Exception as exc:  # a sampler never takes the run down
            stats.errors += 1
            stats.last_error = f"open: {type(exc).__name__}: {exc}"
            log.warning("telemetry %s: open failed: %s", stats.name, exc)
        start = time.monotonic()
        k = 0
        while not self._stop_sampling.is_set():
            now = time.monotonic()
            try:
                rows = sampler.sample(now - self.origin)
            except Exception as exc:
                rows = []
                stats.errors += 1
                if stats.last_error is None:
                    log.warning(
                        "telemetry %s: sample failed (counted): %s", stats.name, exc, exc_info=True
                    )
                stats.last_error = f"{type(exc).__name__}: {exc}"
            stats.samples += 1
            if rows:
                stats.rows += len(rows)
                with self._lock:
                    self._buffer.extend(rows)
            k += 1
            next_at = start + k * sampler.period
            now = time.monotonic()
            if now > next_at:  # late (slow sample or starved CPU): skip, not burst
                skipped = int((now - next_at) // sampler.period) + 1
                stats.missed_ticks += skipped
                k += skipped
                next_at = start + k * sampler.period
            self._stop_sampling.wait(next_at - now)
        try:
            sampler.close()
        except Exception as exc:
            log.debug("telemetry %s: close failed: %s", stats.name, exc)
        stats.cpu_seconds = time.thread_time() - cpu0
        stats.wall_seconds = time.monotonic() - wall0

    def _flush(self) -> None:
        with self._lock:
            batch, self._buffer = self._buffer, []
        if batch:
            self._tracker.add(batch)
        if self._sink is None:
            return
        batch = self._pending + batch
        self._pending = []
        if not batch:
            return
        try:
            self._sink(batch)
        except Exception as exc:
            self.sink_errors += 1
            log.warning(
                "telemetry sink failed (%d rows kept for the next flush): %s", len(batch), exc
            )
            if len(batch) > self.max_pending:
                self.dropped_rows += len(batch) - self.max_pending
                batch = batch[-self.max_pending :]
            self._pending = batch

    def _run_flusher(self) -> None:
        while True:
            self._wake.wait(self._flush_every)
            self._wake.clear()
            stopping = self._stop_flushing.is_set()
            with self._cond:
                request = self._requested  # read before the buffer swap: see flush()
            self._flush()
            if stopping and self._pending:  # one retry for what the sink refused last
                self._flush()
            with self._cond:
                self._served = request
                self._cond.notify_all()
            if stopping:
                return

    def flush(self, timeout: float = 30.0) -> bool:
        """Push every row recorded so far through the sink (on the flusher thread) and wait.
        True when nothing is left pending (the sink took everything)."""
        if self._flusher is None or not self._flusher.is_alive():
            return not self._pending
        with self._cond:
            self._requested += 1
            mine = self._requested
            self._wake.set()
            self._cond.wait_for(lambda: self._served >= mine or not self._flusher_alive(), timeout)
        return not self._pending

    def _flusher_alive(self) -> bool:
        return self._flusher is not None and self._flusher.is_alive()

    def stop(self, timeout: float = 10.0) -> dict[str, float | None]:
        """Stop the samplers, flush every remaining row to the sink, return the run's peaks."""
        if not self._started:
            return self._tracker.result()
        with self._lock:
            self._stop_sampling.set()
            threads = list(self._threads)
        deadline = time.monotonic() + timeout
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._stop_flushing.set()
        self._wake.set()
        if self._flusher is not None:
            self._flusher.join(max(0.0, deadline - time.monotonic()))
        return self.peaks()

    def peaks(self) -> dict[str, float | None]:
        """Peaks over the rows flushed so far (all of them after stop()), as `peaks()` without
        a window; the GPU baseline comes from a GpuSampler that recorded one."""
        baseline: dict[str, int] = {}
        for sampler in self._samplers:
            if isinstance(sampler, GpuSampler):
                baseline.update(sampler.baseline_used)
        return self._tracker.result(baseline or None)

    def stats(self) -> dict[str, SamplerStats]:
        """Per-sampler counters (samples, rows, errors, missed ticks, own CPU after stop)."""
        return dict(self._stats)
