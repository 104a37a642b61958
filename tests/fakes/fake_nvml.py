"""A scripted stand-in for the `pynvml` module (nvidia-ml-py), for tests on machines without a GPU.

An instance behaves like the module: pass it as `GpuSampler(nvml=fake)` or put it in
`sys.modules["pynvml"]`. Device used memory follows a script of steps (one step per
nvmlDeviceGetMemoryInfo call, the last step repeats); per-process usage is set per device.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    """Like pynvml.NVMLError: the base of every NVML failure."""


class NVMLError_NotSupported(NVMLError):  # noqa: N801 (pynvml's spelling)
    pass


class NVMLError_LibraryNotFound(NVMLError):  # noqa: N801
    pass


class NVMLError_Unknown(NVMLError):  # noqa: N801
    pass


class FakeNvml:
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_Unknown = NVMLError_Unknown

    def __init__(self, devices: int = 1, total: int = 80 << 30, used: int = 500 << 20) -> None:
        self.total = total
        self.used_steps: list[list[int]] = [[used] for _ in range(devices)]
        self._step = [0] * devices
        self.procs: list[list[tuple[int, int | None]]] = [[] for _ in range(devices)]
        self.util: list[int] = [0] * devices
        self.fail_init = False  # nvmlInit raises LibraryNotFound (no driver)
        self.procs_unsupported = False  # compute-process query raises NotSupported
        self.util_unsupported = False
        self.fail_memory_once = False  # next memory read raises Unknown (transient)
        self.init_calls = 0
        self.shutdown_calls = 0
        self.proc_calls = 0
        self.util_calls = 0
        self.memory_calls = 0

    # scripting ---------------------------------------------------------------
    def script_used(self, device: int, steps: list[int]) -> None:
        """Device `device` reports these used values, one per read, then the last one forever."""
        self.used_steps[device] = list(steps)
        self._step[device] = 0

    def set_procs(self, device: int, procs: list[tuple[int, int | None]]) -> None:
        """(pid, usedGpuMemory) pairs; None stands for NVML_VALUE_NOT_AVAILABLE."""
        self.procs[device] = list(procs)

    @property
    def initialized(self) -> int:
        return self.init_calls - self.shutdown_calls

    # the pynvml surface the lab uses -----------------------------------------
    def nvmlInit(self) -> None:  # noqa: N802
        if self.fail_init:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        self.init_calls += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        if self.initialized <= 0:
            raise NVMLError_Unknown("shutdown without init")
        self.shutdown_calls += 1

    def _check(self) -> None:
        if self.initialized <= 0:
            raise NVMLError_Unknown("NVML not initialized")

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._check()
        return "550.54.15"

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._check()
        return len(self.used_steps)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:  # noqa: N802
        self._check()
        return SimpleNamespace(index=index)

    def nvmlDeviceGetName(self, handle: Any) -> bytes:  # noqa: N802 (old pynvml gives bytes)
        self._check()
        return f"Fake H200 #{handle.index}".encode()

    def nvmlDeviceGetUUID(self, handle: Any) -> str:  # noqa: N802
        self._check()
        return f"GPU-fake-{handle.index:04d}"

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:  # noqa: N802
        self._check()
        self.memory_calls += 1
        if self.fail_memory_once:
            self.fail_memory_once = False
            raise NVMLError_Unknown("transient")
        i = handle.index
        steps = self.used_steps[i]
        used = steps[min(self._step[i], len(steps) - 1)]
        self._step[i] += 1
        return SimpleNamespace(total=self.total, used=used, free=self.total - used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:  # noqa: N802
        self._check()
        self.proc_calls += 1
        if self.procs_unsupported:
            raise NVMLError_NotSupported("Not Supported")
        return [
            SimpleNamespace(
                pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF
            )
            for pid, used in self.procs[handle.index]
        ]

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:  # noqa: N802
        self._check()
        self.util_calls += 1
        if self.util_unsupported:
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(gpu=self.util[handle.index], memory=0)
