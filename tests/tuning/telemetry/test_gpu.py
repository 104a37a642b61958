"""The GPU sampler against a scripted NVML: memory attributed only to the server's tree, unknown is
not zero, unsupported calls probed once, no driver tolerated, and waiting for memory release."""

from __future__ import annotations

import logging
import os
import sys

import pytest

from tests.checks import by_series
from tests.fakes.fake_nvml import FakeNvml
from tests.fakes.proc_tree import Tree
from tuning.measure.telemetry.gpu import GpuSampler, read_gpu_used, wait_gpu_memory_released
from tuning.measure.telemetry.peaks import peaks

GIB = 1 << 30
MIB = 1 << 20


def test_gpu_attribution_only_to_the_tree(tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    fake.script_used(0, [1 * GIB, 3 * GIB, 9 * GIB])
    fake.util[0] = 42
    foreign = os.getpid()  # exists, but outside the server's tree
    fake.set_procs(0, [(tree.child_pid, 8 * GIB), (tree.pid, None), (foreign, 1 * GIB)])
    gpu = GpuSampler(period=0.1, nvml=fake)
    assert gpu.baseline() == {"gpu0": 1 * GIB}
    gpu.root_pid = tree.pid
    with caplog.at_level(logging.WARNING, logger="tuning.measure.telemetry.gpu"):
        rows = gpu.sample(0.5)
        rows2 = gpu.sample(0.6)
    assert gpu.available is True
    assert by_series(rows, "gpu_used_bytes") == {"gpu0": 3 * GIB}
    assert by_series(rows2, "gpu_used_bytes") == {"gpu0": 9 * GIB}
    assert by_series(rows, "gpu_util_percent") == {"gpu0": 42}
    procs = by_series(rows, "gpu_proc_bytes")
    assert list(procs.values()) == [8 * GIB]
    assert list(procs)[0].endswith(f":{tree.child_pid}")
    assert by_series(rows, "gpu_tree_bytes") == {"gpu0": 8 * GIB}  # not 9: foreign pid excluded
    assert not any(str(tree.pid) in r.label for r in rows)  # None usage: skipped, not 0
    assert sum("usedGpuMemory None" in r.message for r in caplog.records) == 1
    gpu.close()
    assert fake.init_calls == 1 and fake.shutdown_calls == 1


def test_gpu_unknown_usage_writes_no_tree_sum(tree: Tree) -> None:
    fake = FakeNvml()
    fake.set_procs(0, [(tree.child_pid, None)])
    gpu = GpuSampler(tree.pid, nvml=fake)
    rows = gpu.sample(0.0)
    assert "gpu_tree_bytes" not in {r.series for r in rows}
    assert "gpu_proc_bytes" not in {r.series for r in rows}
    assert by_series(rows, "gpu_used_bytes") == {"gpu0": 500 * MIB}
    gpu.close()


def test_gpu_foreign_pid_namespace_is_unknown_not_zero(
    tree: Tree, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml()
    fake.set_procs(0, [(99_999_999, 4 * GIB)])  # a host pid that does not exist here
    gpu = GpuSampler(tree.pid, nvml=fake)
    with caplog.at_level(logging.WARNING, logger="tuning.measure.telemetry.gpu"):
        rows = gpu.sample(0.0) + gpu.sample(0.1)
    assert "gpu_tree_bytes" not in {r.series for r in rows}
    assert sum("PID namespace" in r.message for r in caplog.records) == 1
    fake.set_procs(0, [(os.getpid(), 4 * GIB)])  # a real process, just not ours: tree holds 0
    assert by_series(gpu.sample(0.2), "gpu_tree_bytes") == {"gpu0": 0.0}
    gpu.close()


def test_gpu_unsupported_calls_probed_once(tree: Tree, caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeNvml()
    fake.procs_unsupported = True
    fake.util_unsupported = True
    gpu = GpuSampler(tree.pid, nvml=fake)
    with caplog.at_level(logging.WARNING, logger="tuning.measure.telemetry.gpu"):
        rows = [r for i in range(5) for r in gpu.sample(i * 0.1)]
    assert fake.proc_calls == 1 and fake.util_calls == 1
    assert [r.series for r in rows] == ["gpu_used_bytes"] * 5
    assert sum("not supported" in r.message for r in caplog.records) == 2
    fake.fail_memory_once = True  # a transient error is counted, not fatal
    assert gpu.sample(1.0) == [] and gpu.errors == 1
    assert len(gpu.sample(1.1)) == 1
    gpu.close()


def test_gpu_two_devices_and_sys_modules_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml(devices=2)
    fake.script_used(0, [2 * GIB])
    fake.script_used(1, [3 * GIB])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert read_gpu_used() == {"gpu0": 2 * GIB, "gpu1": 3 * GIB}
    gpu = GpuSampler(None)  # device-level only, no tree
    rows = gpu.sample(0.0)
    assert by_series(rows, "gpu_used_bytes") == {"gpu0": 2 * GIB, "gpu1": 3 * GIB}
    assert "gpu_tree_bytes" not in {r.series for r in rows}
    assert peaks(rows)["peak_gpu_used_bytes"] == 5 * GIB  # summed over devices at one instant
    gpu.close()
    assert fake.initialized == 0


@pytest.mark.parametrize("how", ["absent", "no_driver"])
def test_gpu_absent_nvml_tolerated(
    how: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    nvml = None
    if how == "absent":
        monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    else:
        nvml = FakeNvml()
        nvml.fail_init = True
    with caplog.at_level(logging.WARNING, logger="tuning.measure.telemetry.gpu"):
        gpu = GpuSampler(os.getpid(), nvml=nvml)
        assert gpu.baseline() == {}
        assert [gpu.sample(i * 0.1) for i in range(3)] == [[], [], []]
        gpu.close()
    assert gpu.available is False and gpu.unavailable_reason
    assert sum("NVML unavailable" in r.message for r in caplog.records) == 1
    assert read_gpu_used(nvml) == {}
    assert wait_gpu_memory_released({}, timeout=0.1, nvml=nvml) is True


def test_real_pynvml_without_driver_is_tolerated() -> None:
    gpu = GpuSampler(os.getpid())
    gpu.open()
    if gpu.available:
        gpu.close()
        pytest.skip("this machine has an NVIDIA driver")
    assert gpu.sample(0.0) == []
    gpu.close()


def test_wait_gpu_memory_released() -> None:
    fake = FakeNvml()
    fake.script_used(0, [10 * GIB, 8 * GIB, 5 * GIB, 1 * GIB + 100 * MIB])
    assert (
        wait_gpu_memory_released(
            {"gpu0": 1 * GIB}, tolerance=256 * MIB, timeout=5, poll=0.01, nvml=fake
        )
        is True
    )
    assert fake.memory_calls == 4 and fake.initialized == 0
    fake.script_used(0, [10 * GIB])
    fake.memory_calls = 0
    assert wait_gpu_memory_released({"gpu0": 1 * GIB}, timeout=0.2, poll=0.02, nvml=fake) is False
    # It gave up at its deadline: each poll sleeps at least 0.02 s, so no more than the reads
    # 0.2 s allows (a slow machine reads fewer), and the last one came after the deadline.
    assert 1 <= fake.memory_calls <= 0.2 / 0.02 + 2
    assert fake.initialized == 0
