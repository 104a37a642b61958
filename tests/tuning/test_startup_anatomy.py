"""A server's start split into its phases: real vLLM 0.25 logs from the H200 (a cold torch.compile
and a cache hit), the CPU engine's eager log, the lab's own clock on a log written line by line,
and the fake vLLM started by ServerProcess. No real engine (fast tier)."""

from __future__ import annotations

import tarfile
import time
from pathlib import Path

import pytest

from tests.checks import wait_for
from tests.fakes.engines import fake_launch
from tuning.engine.log_facts import Sheet
from tuning.engine.server import ServerProcess
from tuning.engine.startup_anatomy import (
    MILESTONES,
    LogStamps,
    anatomy,
    compile_cache,
    phases,
    reported,
)

REPO = Path(__file__).resolve().parents[2]
H200_LOGS = REPO / "examples" / "h200" / "server-logs.tar.gz"  # vLLM 0.25.0 on one H200


def h200_log(name: str) -> str:
    with tarfile.open(H200_LOGS) as tar:
        member = tar.extractfile(f"logs/experiment-1/{name}")
        assert member is not None
        return member.read().decode("utf-8", "replace")


def test_the_h200_cold_start_compiled_and_the_next_start_hit_the_cache() -> None:
    cold, warm = h200_log("run-1.log"), h200_log("run-3.log")
    assert compile_cache(cold)["state"] == "miss"
    assert compile_cache(warm)["state"] == "hit"
    assert compile_cache(cold)["dir"] == compile_cache(warm)["dir"]
    assert "torch_compile_cache" in (compile_cache(cold)["dir"] or "")
    assert reported(cold) == {
        "weights_gib": 1.82,
        "weights_s": 1.604832,
        "compile_s": 12.59,
        "compile_graphs_s": 8.08,
        "graph_capture_s": 2.0,
        "graph_capture_gib": 0.45,
        "init_engine_s": 28.76,
    }
    hit = reported(warm)
    assert hit["compile_s"] == 1.95 and hit["compile_cache_load_s"] == 0.575
    assert "compile_graphs_s" not in hit


def test_the_cpu_engine_in_eager_mode_says_no_compile() -> None:
    text = (
        "(APIServer pid=1) WARNING 12-04 20:31:04 [vllm.py:1703] Enforce eager set, disabling "
        "torch.compile, CUDAGraphs, and JIT kernel warmup.\n"
        "(Worker pid=3) INFO 12-04 20:31:37 [base_loader.py:82] Initializing model took 0.21 s\n"
    )
    assert compile_cache(text) == {"state": "eager", "dir": None}
    assert compile_cache("(APIServer pid=1) INFO serving")["state"] is None


def test_phases_add_up_to_healthy_in_time_order_and_end_at_healthy() -> None:
    stamps = {"engine_process": 9.0, "api_process": 4.0, "kv_cache": 20.0, "api_listening": 31.0}
    parts = phases(stamps, 30.5)  # a line read after the healthy answer counts at healthy
    assert [p["key"] for p in parts] == [
        "api_process",
        "engine_process",
        "kv_cache",
        "api_listening",
        "healthy",
    ]
    assert [p["seconds"] for p in parts] == [4.0, 5.0, 11.0, 10.5, 0.0]
    assert sum(p["seconds"] for p in parts) == pytest.approx(30.5)
    assert phases({}, 12.0) == [
        {
            "key": "healthy",
            "label": "first /health 200",
            "start_s": 0.0,
            "end_s": 12.0,
            "seconds": 12.0,
        }
    ]


def test_log_stamps_follow_a_log_written_line_by_line(tmp_path: Path) -> None:
    """Each milestone is stamped when the follower read its line: never before the line was
    written, in the order written, and half a line only once its end came. (Each written line is
    awaited before the next, so how late a busy machine reads them changes no stamp's order.)"""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    t0 = time.monotonic()
    stamps = LogStamps(log, t0).start()
    written = {}
    with open(log, "a") as fh:
        written["api_process"] = time.monotonic() - t0
        fh.write("(APIServer pid=5) INFO vLLM server version 0.25.0\n")
        fh.flush()
        assert wait_for(lambda: "api_process" in stamps.stamps)
        written["engine_process"] = time.monotonic() - t0
        fh.write("(EngineCore pid=6) INFO Initializing a V1 LLM engine (v0.25.0) with\n")
        fh.write("(EngineCore pid=6) INFO GPU KV cache si")  # half a line: not yet a milestone
        fh.flush()
        assert wait_for(lambda: "engine_process" in stamps.stamps)
        time.sleep(0.3)  # the follower reads the half line again: still no milestone
        assert "kv_cache" not in stamps.stamps
        written["kv_cache"] = time.monotonic() - t0
        fh.write("ze: 2,205,168 tokens\n")
        fh.flush()
    got = stamps.stop()
    ms = 0.001  # a stamp is rounded to the millisecond
    assert set(got) == {"api_process", "engine_process", "kv_cache"}
    assert all(got[k] >= written[k] - ms for k in got), (got, written)  # read once written
    assert got["api_process"] <= written["engine_process"] + ms <= got["engine_process"] + 2 * ms
    assert got["engine_process"] <= written["kv_cache"] + ms <= got["kv_cache"] + 2 * ms


def test_a_started_fake_server_stores_phases_that_add_up_to_its_time_to_healthy(
    tmp_path: Path,
) -> None:
    with ServerProcess(fake_launch(None, "start_delay=1.5"), tmp_path / "s.log") as server:
        facts = server.wait_healthy(timeout=20)
    healthy = facts.time_to_healthy_s
    assert healthy is not None and healthy >= 1.5
    parts = facts.anatomy["phases"]
    keys = [p["key"] for p in parts]
    assert keys[:2] == ["api_process", "engine_process"] and keys[-1] == "healthy"
    assert {"weights", "kv_cache", "engine_ready", "api_listening"} <= set(keys)
    assert facts.anatomy["phases_sum_s"] == pytest.approx(healthy, abs=0.01)
    by_key = {p["key"]: p["seconds"] for p in parts}
    # the fake sleeps 0.4 of start_delay (0.6 s) before its weights and 0.6 (0.9 s) before "init
    # engine"; a stamp is late by up to a poll (0.1 s) plus whatever a busy machine adds
    assert by_key["weights"] >= 0.3 and by_key["engine_ready"] >= 0.45
    assert facts.to_dict()["anatomy"] == facts.anatomy


def test_anatomy_of_a_log_is_its_phases_its_own_words_and_its_cache() -> None:
    got = anatomy({"api_process": 1.0}, 3.0, h200_log("run-3.log"))
    assert got["phases_sum_s"] == 3.0 and got["compile_cache"]["state"] == "hit"
    assert got["reported"]["weights_s"] == 1.301917


def test_runs_json_carries_each_runs_anatomy() -> None:
    from tuning.cli.runs import run_as_dict

    anat = anatomy({"api_process": 1.0}, 2.0, "")
    assert run_as_dict({"id": 1, "startup": {"anatomy": anat}})["startup_anatomy"] == anat
    assert run_as_dict({"id": 2})["startup_anatomy"] is None


def test_the_follower_reads_the_facts_while_the_server_starts(tmp_path: Path) -> None:
    """One reader (issue 41, case 8): the follower fills the run's sheet as the log is written,
    so what is left at healthy is what came since its last read. Half a line is no fact: a KV
    line cut at '3,6' must not be read as 36 tokens."""
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    sheet = Sheet({5, 6})
    stamps = LogStamps(log, time.monotonic(), sheet).start()
    with open(log, "a") as fh:
        fh.write("(APIServer pid=5) INFO vLLM server version 0.25.0, serving model m\n")
        fh.write("(EngineCore pid=6) INFO GPU KV cache size: 2,205,168 tokens\n")
        fh.flush()
        assert wait_for(lambda: sheet.get("kv_cache_tokens") == 2_205_168)
        fh.write("(EngineCore pid=6) INFO GPU KV cache size: 3,6")
        fh.flush()
        time.sleep(0.3)
    stamps.stop()
    assert sheet.get("kv_cache_tokens") == 2_205_168 and sheet.conflicts == {}
    assert sheet.complete and sheet.bytes_read == log.stat().st_size
    assert set(stamps.stamps) == {"api_process", "kv_cache"}


def test_a_follower_that_cannot_finish_by_the_deadline_says_so(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"(APIServer pid=5) INFO x\n" * 200_000)  # 5 MB, five chunks
    sheet = Sheet({5})
    LogStamps(log, time.monotonic(), sheet).stop(deadline=time.monotonic() - 1)
    assert not sheet.complete and sheet.bytes_read < log.stat().st_size


def test_milestones_are_found_a_block_at_a_time_as_line_by_line(tmp_path: Path) -> None:
    for name in ("run-1.log", "run-3.log"):
        text = h200_log(name)
        log = tmp_path / name
        log.write_text(text)
        found = LogStamps(log, time.monotonic()).stop()
        by_line = {
            key for key, _, rx in MILESTONES for line in text.splitlines() if rx.search(line)
        }
        assert set(found) == by_line and len(by_line) >= 7
