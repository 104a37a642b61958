"""Where a fleet run ran: node, host, GPU UUIDs and model, CPU model, slot.

Read on the worker, stored with its run, so two runs on different nodes or GPU models are never
compared without a word. GPUs are the ones this worker may use (`CUDA_VISIBLE_DEVICES`, which Ray
sets from `num_gpus`), read through NVML lazily; a machine without a driver has none.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from tuning.engine import hardware


def visible_gpus() -> list[dict[str, Any]]:
    """[{index, uuid, name}] of the GPUs in CUDA_VISIBLE_DEVICES (all when unset); [] without
    NVML."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    wanted = [v.strip() for v in visible.split(",") if v.strip()] if visible else None
    return [
        {"index": g["index"], "uuid": g["uuid"], "name": g["name"]}
        for g in hardware.nvml_gpus()
        if wanted is None or str(g["index"]) in wanted or g["uuid"] in wanted
    ]


def describe_placement(node_id: str, slot: str) -> dict[str, Any]:
    """This worker's placement, as stored in the run's placement columns."""
    gpus = visible_gpus()
    models = sorted({g["name"] for g in gpus})
    return {
        "node_id": node_id,
        "node_host": socket.gethostname(),
        "gpu_uuids": [g["uuid"] for g in gpus],
        "gpu_model": " + ".join(models) if models else None,
        "cpu_model": hardware.hardware_details()["cpu"],
        "slot": slot,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "pid": os.getpid(),
    }


def placement_columns(placement: dict[str, Any], attempt: int) -> dict[str, Any]:
    """The run columns of m005_fleet_placement from a placement."""
    return {
        "node_id": placement.get("node_id"),
        "node_host": placement.get("node_host"),
        "gpu_uuids_json": placement.get("gpu_uuids") or [],
        "gpu_model": placement.get("gpu_model"),
        "cpu_model": placement.get("cpu_model"),
        "slot": placement.get("slot"),
        "attempt": attempt,
        "placement_json": placement,
    }
