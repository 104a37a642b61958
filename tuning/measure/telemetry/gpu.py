"""GPU memory through NVML: device-level used memory, and the part the server's process tree holds.

NVML (`pynvml` from nvidia-ml-py) is imported lazily, so a machine without a driver still samples
the rest; one lock guards every NVML call in the process; unsupported counters are probed once and
warned about once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import psutil

from core.records import SampleRow
from tuning.measure.telemetry.proctree import ProcessTree
from tuning.measure.telemetry.recorder import Sampler

log = logging.getLogger(__name__)

MIB = 1 << 20

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
    memory = True

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
                    if foreign and not any(psutil.pid_exists(p) for p in foreign):
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
