"""Issue 13, item 7: findings from a stored run's signals, each with the next experiment to try
(tuning.decide.findings), from the CLI (`findings --run ID`) and planned from the run
(`plan_next`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect, queries, repo, snapshot
from tests.factories import run_row, seed_clean_lab
from tuning.decide.findings import findings, plan_suggested, stored_findings
from tuning.engine.embedded import embedded_spec


def kinds(run: dict[str, Any]) -> list[str]:
    return [f.kind for f in findings(run)]


def test_a_healthy_run_has_no_finding() -> None:
    run = run_row(1, summary={"max_num_requests_waiting": 0, "peak_kv_cache_usage_perc": 0.9})
    assert findings(run) == []


def test_preemptions_mean_kv_pressure_with_more_memory_or_fewer_seqs() -> None:
    run = run_row(1, preemptions=37, peak_kv_cache_usage_perc=0.998)
    (f,) = findings(run)
    assert f.kind == "kv_pressure" and "37 preemptions" in f.evidence and "100 %" in f.evidence
    more, fewer = f.next
    assert (more.param, more.values) == ("gpu-memory-utilization", [0.9, 0.95])
    assert (fewer.param, fewer.values) == ("max-num-seqs", [16, 8])
    budget = run_row(2, preemptions=3, **{"config": {"kv-cache-memory-bytes": 2**30}})
    assert findings(budget)[0].next[0].values == [2**30, 2**31]
    cpu = run_row(3, preemptions=3, env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert (cpu_next := findings(cpu)[0].next[0]).param == "VLLM_CPU_KVCACHE_SPACE"
    assert cpu_next.values == [1, 2]


def test_waiting_with_room_in_the_kv_cache_is_a_scheduler_cap() -> None:
    summary = {"max_num_requests_waiting": 12, "max_num_requests_running": 4}
    run = run_row(1, summary=summary, peak_kv_cache_usage_perc=0.3, config={"max-num-seqs": 4})
    (f,) = findings(run)
    assert f.kind == "scheduler_cap" and "up to 12 requests waiting" in f.evidence
    assert [(n.param, n.values) for n in f.next] == [
        ("max-num-seqs", [4, 8]),  # at most 4 ran of the 8 the load sent
        ("max-num-batched-tokens", [2048, 4096]),
    ]
    at_load = run_row(2, summary={**summary, "max_num_requests_running": 8})
    (only,) = findings({**at_load, "peak_kv_cache_usage_perc": 0.3})[0].next
    assert only.param == "max-num-batched-tokens"  # all 8 ran: max-num-seqs was not the cap
    full = run_row(3, summary=summary, peak_kv_cache_usage_perc=0.95)
    assert "scheduler_cap" not in kinds(full)  # the KV cache was full: memory, not a cap


def samples(waiting: list[int], kv: float) -> list[dict[str, Any]]:
    rows = [{"t_s": t, "series": "num_requests_waiting", "value": w} for t, w in enumerate(waiting)]
    return rows + [{"t_s": t, "series": "kv_cache_usage_perc", "value": kv} for t in range(20)]


def test_the_samples_tell_a_lasting_queue_from_a_moment_at_ramp_up() -> None:
    summary = {"max_num_requests_waiting": 40, "load_window_s": [2, 19]}
    run = run_row(1, summary=summary, peak_kv_cache_usage_perc=0.3, config={"max-num-seqs": 4})
    ramp = samples([40, 30, 20, 5] + [0] * 16, kv=0.3)  # waiting before the window and at t=2-3
    assert findings(run, ramp) == []
    lasting = samples([0, 0] + [12] * 18, kv=0.3)
    (f,) = findings(run, lasting)
    assert "for 100 % of the load (18 samples)" in f.evidence
    assert findings(run, samples([0, 0] + [12] * 18, kv=0.9)) == []  # the KV cache was full


def test_client_bound_reuses_the_runner_flag() -> None:
    health = {"client_bound": True, "client_bound_reasons": ["client CPU 97% of a core"]}
    (f,) = findings(run_row(1, health=health))
    assert f.kind == "client_bound" and f.evidence == "client CPU 97% of a core"
    (again,) = f.next
    assert (again.param, again.values, again.repeats) == ("concurrency", [8], 2)
    assert findings(run_row(2, health={"client_bound": False})) == []


def test_low_prefix_hits_on_a_shared_prefix_load() -> None:
    wl = {"num_requests": 24, "concurrency": 8, "input_len": 64, "output_len": 16}
    shared = {**wl, "shared_prefix_len": 48}
    low = run_row(1, workload=shared, prefix_cache_hit_rate=0.05)
    (f,) = findings(low)
    assert f.kind == "low_prefix_hits" and "hit rate 5 %" in f.evidence and "75 %" in f.evidence
    assert f.next[0].param == "gpu-memory-utilization"  # whole blocks of prefix: evicted?
    short = run_row(5, workload={**wl, "shared_prefix_len": 24}, prefix_cache_hit_rate=0.0)
    (block,) = findings(short)[0].next  # a prefix shorter than a block (32) is never cached
    assert (block.param, block.values) == ("block-size", [32, 16])
    off = run_row(2, workload=shared, prefix_cache_hit_rate=None)
    off["config"]["enable-prefix-caching"] = False
    assert findings(off)[0].next[0].values == [False, True]
    fine = run_row(3, workload=shared, prefix_cache_hit_rate=0.7)
    assert findings(fine) == []
    no_prefix = run_row(4, workload={**wl, "shared_prefix_len": 0}, prefix_cache_hit_rate=0.0)
    assert findings(no_prefix) == []


def test_a_config_the_engine_did_not_apply_comes_first() -> None:
    mismatch = [{"param": "block-size", "reason": "block-size: asked 64, the engine ran with 16"}]
    run = run_row(1, config_mismatch=mismatch, preemptions=5)
    assert kinds(run) == ["config_mismatch", "kv_pressure"]
    assert "asked 64" in findings(run)[0].evidence and findings(run)[0].next == []


def test_the_next_experiment_is_planned_from_the_run_and_shown_as_a_command(
    fresh_db: Path,
) -> None:
    info = seed_clean_lab(fresh_db, values=(4,), repeats=1)
    rid = info["run_ids"][0]
    with connect(fresh_db) as db:
        repo.update_run(db, rid, preemptions=9)
        run = queries.get_run(db, rid)
        exp = queries.get_experiment(db, info["experiment_id"])
    (f,) = findings(run)  # from the row alone (without its samples)
    fewer = next(n for n in f.next if n.param == "max-num-seqs")
    assert fewer.values == [4, 2]
    command = fewer.command(run)
    assert command.startswith("tuning-lab experiment --param max-num-seqs --values 4,2")
    assert "--set block-size=16" in command and "--concurrency 8" in command
    exp_id = plan_suggested(fresh_db, run, fewer, exp, embedded_spec(), author="ada", host="box")
    with connect(fresh_db, readonly=True) as db:
        planned = queries.get_experiment(db, exp_id)
    assert planned["param"] == "max-num-seqs" and planned["values"] == [4, 2]
    assert planned["config"]["block-size"] == 16 and planned["status"] == "queued"
    assert planned["workload"]["concurrency"] == run["workload"]["concurrency"]
    assert f"next after run {rid}" in planned["name"]


def test_findings_from_the_cli(
    fresh_db: Path, lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    info = seed_clean_lab(fresh_db, values=(4,), repeats=1)
    rid = info["run_ids"][0]
    with connect(fresh_db) as db:
        repo.update_run(db, rid, preemptions=9)
    done = tuning_cli(["findings", "--run", str(rid), "--db", str(fresh_db), "--json"], lab_home)
    assert done.returncode == 0, done.stderr
    f, cap = json.loads(done.stdout)["findings"]  # the seeded samples queue 1 request throughout
    assert cap["kind"] == "scheduler_cap" and "100 % of the load" in cap["evidence"]
    assert f["kind"] == "kv_pressure" and f["next"][1]["values"] == [4, 2]
    assert f["next"][1]["command"].startswith("tuning-lab experiment --param max-num-seqs")
    text = tuning_cli(["findings", "--run", str(rid), "--db", str(fresh_db)], lab_home)
    assert "KV-cache pressure" in text.stdout and "next: max-num-seqs = 4, 2" in text.stdout
    missing = tuning_cli(["findings", "--run", "999", "--db", str(fresh_db)], lab_home)
    assert missing.returncode == 1 and "no run 999" in missing.stderr


def test_findings_on_the_committed_h200_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real signals: the memory wall's 1 GiB KV budget preempted 736 times (KV pressure), the
    16 GiB run queued only at ramp-up (nothing), max-num-seqs 32 at concurrency 256 held 224
    requests waiting with the KV cache nearly empty (a scheduler cap: try 64)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    examples = Path(__file__).resolve().parents[2] / "examples" / "h200"

    def found(name: str, run_id: int) -> list[Any]:
        with connect(snapshot.expanded(examples / name), readonly=True) as db:
            return stored_findings(db, queries.get_run(db, run_id))

    wall = "lab-h200-memory-wall.db.xz"
    (kv,) = found(wall, 1)
    assert kv.kind == "kv_pressure" and "736 preemptions" in kv.evidence
    assert (kv.next[0].param, kv.next[0].values) == ("kv-cache-memory-bytes", [2**30, 2**31])
    assert found(wall, 3) == []
    (cap,) = found("lab-h200.db.xz", 5)
    assert cap.kind == "scheduler_cap" and cap.next[0].values == [32, 64]
