"""Fleet runs in a comparison: a different GPU model is not comparable; different nodes (same GPU
model) are comparable with a warning the comparison's summary line carries."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from tuning.compare.comparability import check_pair
from tuning.compare.present import comparability_text


def _run(run_id: int, value: int, **placement: Any) -> dict[str, Any]:
    return {
        "id": run_id,
        "model": "m",
        "engine": "custom",
        "vllm_version": "0.32",
        "hardware": "8x NVIDIA H200",
        "config": {"max-num-seqs": value},
        "workload": {"num_requests": 8, "concurrency": 2, "input_len": 16, "output_len": 4},
        "workload_fingerprint": "f",
        **placement,
    }


def test_different_gpu_models_are_not_comparable() -> None:
    base = _run(1, 2, node_id="a", gpu_model="NVIDIA H200")
    cand = _run(2, 4, node_id="a", gpu_model="NVIDIA H100 80GB HBM3")
    check = check_pair(base, cand)
    assert not check.comparable and "different GPU model" in check.reason


def test_different_nodes_are_comparable_with_a_warning() -> None:
    base = _run(1, 2, node_id="aaaa", node_host="gpu-1", gpu_model="NVIDIA H200")
    cand = _run(2, 4, node_id="bbbb", node_host="gpu-2", gpu_model="NVIDIA H200")
    check = check_pair(base, cand)
    assert check.comparable and check.warnings
    assert "gpu-2" in check.warnings[0] and "gpu-1" in check.warnings[0]
    same = check_pair(base, _run(3, 4, node_id="aaaa", gpu_model="NVIDIA H200"))
    local = check_pair(_run(1, 2), _run(4, 4))  # local runs: no placement, no word
    assert not same.warnings and not local.warnings
    comparison = SimpleNamespace(
        checks=[check, same], excluded=[], run_count=3, param="x", sides=[]
    )
    assert "different nodes" in comparability_text(comparison)  # type: ignore[arg-type]
    comparison.checks = [same]
    assert "different nodes" not in comparability_text(comparison)  # type: ignore[arg-type]
