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


def _gpus() -> list[dict[str, Any]]:
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
            name = pynvml.nvmlDeviceGetName(handle)
            total = pynvml.nvmlDeviceGetMemoryInfo(handle).total
            out.append(
                {
                    "index": i,
                    "name": name if isinstance(name, str) else name.decode(),
                    "memory_total_bytes": int(total),
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


@lru_cache(maxsize=1)
def describe() -> dict[str, Any]:
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
