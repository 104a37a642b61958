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
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

import psutil
from prometheus_client.parser import text_string_to_metric_families

from .records import SampleRow

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
    if (len(cmdline) >= 3 and os.path.basename(cmdline[1]) == "vllm"
            and cmdline[2] == "serve"):   # python /path/bin/vllm serve ...
        return "APIServer"
    if "::" in comm:                      # comm is truncated to 15 chars but still useful
        return comm.split("::", 1)[1] or comm
    return comm or (os.path.basename(first) if first else "proc")


def _has_children_file() -> bool:
    pid = os.getpid()
    return os.path.exists(f"/proc/{pid}/task/{pid}/children")


class ProcessTree:
    """The live set of processes under a root pid, cheap enough to refresh every 100 ms.

    psutil's `children(recursive=True)` reads /proc/*/stat for every process on the machine
    (~2 ms here); instead each refresh follows /proc/<pid>/task/<pid>/children from the root
    (~20 us for a small tree), which sees children forked by each process's main thread, and a
    full psutil scan every `rescan_every` seconds catches children forked by other threads.
    psutil.Process objects are cached by pid so `cpu_percent()` has a previous reading.
    """

    def __init__(self, root_pid: int, rescan_every: float = 1.0) -> None:
        self.root_pid = root_pid
        self.rescan_every = rescan_every
        self._fast = _has_children_file()
        self._procs: dict[int, psutil.Process] = {}
        self._last_scan = -math.inf
        self._labels: dict[int, str] = {}
        self._label_final: set[int] = set()
        self._label_at: dict[int, float] = {}

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
            try:
                with open(f"/proc/{pid}/task/{pid}/children", "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            for token in data.split():
                child = int(token)
                if child not in found:
                    found.add(child)
                    stack.append(child)
        return found

    def _full_scan(self) -> set[int]:
        root = self._proc(self.root_pid)
        if root is None:
            return set()
        try:
            return {self.root_pid} | {c.pid for c in root.children(recursive=True)}
        except psutil.Error:
            return set()

    def refresh(self) -> dict[int, psutil.Process]:
        """Current members as cached psutil.Process objects (root included while it lives).

        Membership is sticky: a process seen once stays a member until it exits, so an EngineCore
        orphaned by a crashed API server (reparented to init) is still counted while it holds memory.
        """
        found: set[int] = set()
        if psutil.pid_exists(self.root_pid):
            now = time.monotonic()
            if self._fast:
                found = self._walk_main_threads()
            if not self._fast or now - self._last_scan >= self.rescan_every:
                found |= self._full_scan()
                self._last_scan = now
        members: dict[int, psutil.Process] = {}
        for pid in found:
            proc = self._proc(pid)
            if proc is not None:
                members[pid] = proc
        for pid in [p for p in self._procs if p not in found]:
            proc = self._procs[pid]
            try:
                alive = proc.is_running()   # compares create_time: a reused pid is not ours
            except psutil.Error:
                alive = False
            if alive:
                members[pid] = proc
            else:
                self.forget(pid)
        return members

    def pids(self) -> set[int]:
        return set(self.refresh())

    def forget(self, pid: int) -> None:
        """Drop a pid that exited (its cached Process and label go with it)."""
        self._procs.pop(pid, None)
        self._labels.pop(pid, None)
        self._label_final.discard(pid)
        self._label_at.pop(pid, None)

    def label(self, pid: int) -> str:
        """"<name>:<pid>", re-derived about once a second until vLLM has set the process title."""
        now = time.monotonic()
        if pid in self._label_final or (pid in self._labels and now - self._label_at[pid] < 1.0):
            return self._labels[pid]
        name = "proc"
        proc = self._procs.get(pid)
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
    (label "", percent of one core, summed; a process's first reading counts 0).
    RSS, not USS/PSS: RSS comes from /proc/<pid>/statm and costs microseconds, while USS/PSS need
    /proc/<pid>/smaps_rollup, a page-table walk that takes milliseconds on a process with large
    (e.g. CUDA) mappings. RSS counts shared pages (libraries, fork-shared memory) once per process,
    so the tree sum overstates the truly private total by the shared part; it is the number people
    compare with `ps`/`top`, and its climb during a run is what matters here.
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
        members = self.tree.refresh()
        if not members:
            return rows
        for pid, proc in sorted(members.items()):
            try:
                rss = proc.memory_info().rss
                cpu = proc.cpu_percent(None)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                self.tree.forget(pid)
                continue
            except psutil.Error:        # AccessDenied: not ours to read; skip rather than write 0
                continue
            total_rss += rss
            total_cpu += cpu
            rows.append(SampleRow(t, "proc_rss_bytes", float(rss), self.tree.label(pid)))
        if rows:
            rows.append(SampleRow(t, "tree_rss_bytes", float(total_rss), ""))
            rows.append(SampleRow(t, "tree_cpu_percent", float(total_cpu), ""))
        return rows


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
            return {f"gpu{i}": int(self.mod.nvmlDeviceGetMemoryInfo(h).used)
                    for i, h in enumerate(self.handles)}

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


def wait_gpu_memory_released(baseline: Mapping[str, int], tolerance: int = 512 * MIB,
                             timeout: float = 60.0, poll: float = 0.5,
                             nvml: Any | None = None) -> bool:
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

    def __init__(self, root_pid: int | None = None, period: float = 0.1,
                 nvml: Any | None = None, rescan_every: float = 1.0) -> None:
        super().__init__(period)
        self._lib = _Nvml(nvml)
        self._rescan_every = rescan_every
        self._tree: ProcessTree | None = None
        self.root_pid = root_pid
        self.available: bool | None = None       # None until open()/baseline() tried NVML
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
            self._warn_once("unavailable", "GPU sampling off: NVML unavailable (%s)",
                            self._lib.error)

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
        members = self._tree.refresh() if self._tree is not None else {}
        tree_pids = set(members)
        proc_bytes: dict[int, int] = {}
        mod = self._lib.mod
        with _NVML_LOCK:
            for i, handle in enumerate(self._lib.handles):
                dev = f"gpu{i}"
                try:
                    rows.append(SampleRow(t, "gpu_used_bytes",
                                          float(mod.nvmlDeviceGetMemoryInfo(handle).used), dev))
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
                    if used is None:                 # NVML_VALUE_NOT_AVAILABLE: unknown, not 0
                        self._warn_once("used-none", "NVML reports no per-process memory for "
                                        "pid %s (usedGpuMemory None): skipped", pid)
                        continue
                    ours_known = True
                    tree_sum += int(used)
                    proc_bytes[pid] = proc_bytes.get(pid, 0) + int(used)
                if ours_known:
                    rows.append(SampleRow(t, "gpu_tree_bytes", float(tree_sum), dev))
                elif not ours_seen:
                    if foreign and not any(psutil.pid_exists(p) for p in foreign):
                        self._warn_once("pidns", "NVML pids %s do not exist in this PID "
                                        "namespace (container?): per-process GPU memory is "
                                        "unknown; use gpu_used_bytes - baseline", foreign[:4])
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

    def __init__(self, base_url: str, period: float = 0.5, timeout: float = 2.0,
                 headers: Mapping[str, str] | None = None) -> None:
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
    "num_preemptions_total": "preemptions_delta",
    "generation_tokens_total": "generation_tokens_delta",
    "prompt_tokens_total": "prompt_tokens_delta",
    "request_success_total": "request_success_delta",
    "prefix_cache_queries_total": "prefix_cache_queries_delta",
    "prefix_cache_hits_total": "prefix_cache_hits_delta",
}
PEAK_KEYS: tuple[str, ...] = (
    "peak_tree_rss_bytes", "peak_tree_cpu_percent", "peak_gpu_used_bytes",
    "peak_gpu_used_over_baseline_bytes", "peak_gpu_tree_bytes", *(
        v for k, v in _MAXED.items() if k not in ("tree_rss_bytes", "tree_cpu_percent")),
    *_DELTAS.values(), "prefix_cache_hit_rate",
)


class PeakTracker:
    """Running peaks and counter deltas, fed in time order; O(1) memory for long runs."""

    def __init__(self) -> None:
        self._max: dict[str, float] = {}
        self._first: dict[str, float] = {}
        self._last: dict[str, float] = {}
        self._acc: dict[str, tuple[float, float]] = {}   # series -> (t, running sum at t)

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
            out["peak_gpu_used_over_baseline_bytes"] = (
                out["peak_gpu_used_bytes"] - float(sum(gpu_baseline.values())))
        for series, key in _DELTAS.items():
            if series in self._last:
                out[key] = self._last[series] - self._first[series]
        queries = out["prefix_cache_queries_delta"]
        hits = out["prefix_cache_hits_delta"]
        if queries and hits is not None and queries > 0:
            out["prefix_cache_hit_rate"] = hits / queries
        return out


def peaks(rows: Iterable[SampleRow],
          gpu_baseline: Mapping[str, int] | None = None) -> dict[str, float | None]:
    """Peaks of a run's samples (any order): tree RSS, device and tree GPU memory (summed over GPUs
    at each instant), KV usage, max running/waiting, counter deltas (last - first) and the prefix
    cache hit rate over the run (delta hits / delta queries). Over-baseline assumes every sample
    covers the devices in `gpu_baseline`."""
    tracker = PeakTracker()
    tracker.add(sorted(rows, key=lambda r: r.t))
    return tracker.result(gpu_baseline)


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
    seconds, so a SQLite sink sees one thread (open its connection there, or allow cross-thread
    use). A sink that raises keeps its batch for the next flush (bounded by `max_pending`).
    stop() joins, flushes the rest and returns `peaks()` over everything recorded.
    """

    def __init__(self, max_pending: int = 200_000) -> None:
        self.max_pending = max_pending
        self.origin: float = time.monotonic()
        self.sink_errors = 0
        self.dropped_rows = 0
        self._samplers: list[Sampler] = []
        self._stats: dict[str, SamplerStats] = {}
        self._threads: list[threading.Thread] = []
        self._flusher: threading.Thread | None = None
        self._buffer: list[SampleRow] = []
        self._pending: list[SampleRow] = []
        self._lock = threading.Lock()
        self._stop_sampling = threading.Event()
        self._stop_flushing = threading.Event()
        self._tracker = PeakTracker()
        self._sink: Sink | None = None
        self._flush_every = 1.0
        self._started = False

    @property
    def running(self) -> bool:
        return self._started and not self._stop_sampling.is_set()

    def start(self, samplers: Sequence[Sampler], sink: Sink | None = None,
              flush_every: float = 1.0, *, origin: float | None = None) -> None:
        """Start sampling now; t of every row is time.monotonic() - origin (default: now)."""
        if self._started:
            raise RuntimeError("Telemetry already started; make a new one per run")
        self._started = True
        self.origin = time.monotonic() if origin is None else origin
        self._samplers = list(samplers)
        self._sink = sink
        self._flush_every = flush_every
        names: dict[str, int] = {}
        for sampler in self._samplers:
            n = names.get(sampler.name, 0)
            names[sampler.name] = n + 1
            key = sampler.name if n == 0 else f"{sampler.name}#{n}"
            stats = SamplerStats(key, sampler.period)
            self._stats[key] = stats
            thread = threading.Thread(target=self._run_sampler, args=(sampler, stats),
                                      name=f"telemetry-{key}", daemon=True)
            self._threads.append(thread)
        self._flusher = threading.Thread(target=self._run_flusher, name="telemetry-flush",
                                         daemon=True)
        for thread in self._threads:
            thread.start()
        self._flusher.start()

    def _run_sampler(self, sampler: Sampler, stats: SamplerStats) -> None:
        cpu0 = time.thread_time()
        wall0 = time.monotonic()
        try:
            sampler.open()
        except Exception as exc:      # a sampler never takes the run down
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
                    log.warning("telemetry %s: sample failed (counted): %s", stats.name, exc,
                                exc_info=True)
                stats.last_error = f"{type(exc).__name__}: {exc}"
            stats.samples += 1
            if rows:
                stats.rows += len(rows)
                with self._lock:
                    self._buffer.extend(rows)
            k += 1
            next_at = start + k * sampler.period
            now = time.monotonic()
            if now > next_at:                # late (slow sample or starved CPU): skip, not burst
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
            log.warning("telemetry sink failed (%d rows kept for the next flush): %s",
                        len(batch), exc)
            if len(batch) > self.max_pending:
                self.dropped_rows += len(batch) - self.max_pending
                batch = batch[-self.max_pending:]
            self._pending = batch

    def _run_flusher(self) -> None:
        while not self._stop_flushing.wait(self._flush_every):
            self._flush()
        self._flush()
        if self._pending:   # one retry for what the sink refused last
            self._flush()

    def stop(self, timeout: float = 10.0) -> dict[str, float | None]:
        """Stop the samplers, flush every remaining row to the sink, return the run's peaks."""
        if not self._started:
            return self._tracker.result()
        self._stop_sampling.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._stop_flushing.set()
        if self._flusher is not None:
            self._flusher.join(max(0.0, deadline - time.monotonic()))
        return self.peaks()

    def peaks(self) -> dict[str, float | None]:
        """Peaks over the rows flushed so far (all of them after stop())."""
        baseline: dict[str, int] = {}
        for sampler in self._samplers:
            if isinstance(sampler, GpuSampler):
                baseline.update(sampler.baseline_used)
        return self._tracker.result(baseline or None)

    def stats(self) -> dict[str, SamplerStats]:
        """Per-sampler counters (samples, rows, errors, missed ticks, own CPU after stop)."""
        return dict(self._stats)
