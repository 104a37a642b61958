"""Comparability: one changed parameter is comparable, anything else that differs (workload,
hardware, vLLM version, model, a second parameter) is named as the reason it is not."""

from __future__ import annotations

from tests.factories import run_row as run
from tuning.compare.comparability import check_pair, parameter_diff


def test_one_parameter_is_comparable() -> None:
    check = check_pair(run(1, 16), run(2, 32))
    assert check.comparable and check.changed == {"max-num-seqs": (16, 32)}
    assert check_pair(run(1, 16), run(2, 16)).comparable  # A/A


def test_reasons_for_not_comparable() -> None:
    base = run(1, 16)
    fp = check_pair(base, run(2, 32, workload_fingerprint="other"))
    assert not fp.comparable and "workload fingerprint" in fp.reason
    hw = check_pair(base, run(3, 32, hardware="H200"))
    assert not hw.comparable and "different hardware: cpu vs H200" in hw.reason
    ver = check_pair(base, run(4, 32, vllm_version="0.11.0"))
    assert "vLLM version" in ver.reason
    model = check_pair(base, run(5, 32, model="llama"))
    assert "different model" in model.reason
    two = run(6, 32)
    two["config"] = {**two["config"], "block-size": 64}
    check = check_pair(base, two)
    assert not check.comparable and "2 parameters differ" in check.reason
    assert "block-size" in check.reason and "max-num-seqs" in check.reason


def test_workload_parameter_sweep_is_comparable_despite_its_fingerprint() -> None:
    base = run(1, 16, param="concurrency")
    cand = run(2, 32, param="concurrency", workload_fingerprint="another")
    params, other = parameter_diff(base, cand)
    assert params == {"concurrency": (16, 32)} and not other
    assert check_pair(base, cand).comparable
    seeded = run(3, 32, param="concurrency")
    seeded["workload"] = {**seeded["workload"], "seed": 9}
    check = check_pair(base, seeded)
    assert not check.comparable and "different workload: seed" in check.reason
