"""What machine a run ran on, in one comparable string (two runs on different hardware are not
comparable) plus the details behind it."""

from __future__ import annotations

import os
import platform
from functools import lru_cache
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def nvml_gpus() -> list[dict[str, Any]]:
    """Every GPU NVML sees: [{index, uuid, name, memory_total_bytes}]; [] without a driver."""
    try:
        import pynvml  # lazily: most of our machines have no driver
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            out.append(
                {
                    "index": i,
                    "uuid": _text(pynvml.nvmlDeviceGetUUID(handle)),
                    "name": _text(pynvml.nvmlDeviceGetName(handle)),
                    "memory_total_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(handle).total),
                }
            )
        return out
    except Exception:
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _gpus() -> list[dict[str, Any]]:
    """The GPUs as the stored hardware description has always held them (no UUIDs: a run's
    hardware says which model, not which card)."""
    return [{k: g[k] for k in ("index", "name", "memory_total_bytes")} for g in nvml_gpus()]


@lru_cache(maxsize=1)
def hardware_details() -> dict[str, Any]:
    gpus = _gpus()
    cores = os.cpu_count() or 0
    try:
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        mem = 0
    cpu = _cpu_model()
    if gpus:
        names = sorted({g["name"] for g in gpus})
        summary = f"{len(gpus)}x {' + '.join(names)}"
    else:
        summary = f"CPU {cpu} ({cores} cores, {mem / 2**30:.0f} GiB)"
    return {
        "summary": summary,
        "cpu": cpu,
        "cores": cores,
        "memory_bytes": mem,
        "gpus": gpus,
        "machine": platform.machine(),
    }
