"""The process-tree sampler on a real tree: names from vLLM's process titles, RSS per process and
summed, an orphaned child still counted, and each sample re-reading the files it holds open."""

from __future__ import annotations

import os
import signal
import time

import psutil
import pytest

from tests.checks import by_series
from tests.fakes.proc_tree import ALLOC_MB, Tree
from tuning.measure.telemetry.proctree import ProcessTreeSampler, process_name

MIB = 1 << 20


def test_process_name_from_vllm_titles() -> None:
    assert process_name(["VLLM::EngineCore"]) == "EngineCore"
    assert process_name(["VLLM::Worker_TP0  "]) == "Worker_TP0"
    assert process_name(["MYLAB::EngineCore_DP1"]) == "EngineCore_DP1"
    assert (
        process_name(
            ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "x"]
        )
        == "APIServer"
    )
    assert process_name(["/venv/bin/vllm", "serve", "tiny"]) == "APIServer"
    assert process_name(["/venv/bin/python3", "/venv/bin/vllm", "serve", "tiny"]) == "APIServer"
    assert process_name(["/usr/bin/python3", "-c", "pass"], "python3") == "python3"
    assert process_name([], "VLLM::EngineCor") == "EngineCor"
    assert process_name([], "") == "proc"


def test_tree_rss_rises_by_the_child_allocation(tree: Tree) -> None:
    sampler = ProcessTreeSampler(tree.pid, period=0.1)
    before = sampler.sample(0.0)
    labels = by_series(before, "proc_rss_bytes")
    assert any(label.endswith(f":{tree.pid}") for label in labels)
    assert any(label.endswith(f":{tree.child_pid}") for label in labels)
    rss0 = by_series(before, "tree_rss_bytes")[""]

    tree.allocate()
    after = sampler.sample(0.1)
    rss1 = by_series(after, "tree_rss_bytes")[""]
    rise_mb = (rss1 - rss0) / MIB
    assert ALLOC_MB * 0.85 < rise_mb < ALLOC_MB * 1.35, rise_mb
    child = [
        v for k, v in by_series(after, "proc_rss_bytes").items() if k.endswith(f":{tree.child_pid}")
    ]
    assert child and child[0] > ALLOC_MB * MIB
    assert sum(by_series(after, "proc_rss_bytes").values()) == rss1
    assert "" in by_series(after, "tree_cpu_percent")
    assert all(r.t == 0.1 for r in after)


def test_orphaned_child_still_counted_and_gone_tree_gives_nothing(tree: Tree) -> None:
    sampler = ProcessTreeSampler(tree.pid, period=0.1)
    sampler.sample(0.0)
    os.kill(tree.pid, signal.SIGKILL)  # the "API server" dies, the "EngineCore" lingers
    tree.parent.wait(timeout=10)
    rows = sampler.sample(0.1)
    assert any(k.endswith(f":{tree.child_pid}") for k in by_series(rows, "proc_rss_bytes"))
    os.kill(tree.child_pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while psutil.pid_exists(tree.child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sampler.sample(0.2) == []


def test_a_sample_rereads_open_proc_files_and_scans_only_on_schedule(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What makes it cheap enough for every 100 ms: after the first sample, each sample re-reads
    the /proc files it already holds open (pread) and walks no process list; psutil's full scan
    comes once per `rescan_every`. (Its cost, side by side with a psutil walk:
    benchmarks/sampler_cost.py; a wall-clock bound here failed on a busy box.)"""
    from tuning.measure.telemetry import proctree

    sampler = ProcessTreeSampler(tree.pid, period=0.1, rescan_every=3600.0)
    first = sampler.sample(0.0)
    opened: list[str] = []
    scans: list[int] = []
    real_open, real_scan = proctree.os.open, sampler.tree._full_scan
    monkeypatch.setattr(
        proctree.os, "open", lambda path, *a: opened.append(path) or real_open(path, *a)
    )
    monkeypatch.setattr(sampler.tree, "_full_scan", lambda: scans.append(1) or real_scan())
    for i in range(1, 51):
        rows = sampler.sample(i * 0.1)
        assert by_series(rows, "tree_rss_bytes")  # each sample still reads every member
    assert opened == [] and scans == []
    assert set(by_series(rows, "proc_rss_bytes")) == set(by_series(first, "proc_rss_bytes"))


def test_no_root_pid_samples_nothing() -> None:
    assert ProcessTreeSampler(0).sample(0.0) == []
    assert ProcessTreeSampler(99_999_999).sample(0.0) == []
