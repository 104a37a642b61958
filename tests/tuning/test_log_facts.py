"""Startup facts come only from vLLM's own lines of the launched server (issue 41, case 2): an
engine that printed vLLM-like lines before vLLM's own got KV tokens 999,999,999 (real 3,643,792),
version 9.9.9-evil and pids 1 stored from the first matching line, the run `done` with no mismatch.
Now a line counts only when its prefix names a process of the launch, the last value wins, and a
fact the launch's own lines disagree on is a mismatch the run shows. The fake vLLM's `fake_lines`
fault prints the lies (`foreign`: as pid 1; `own`: with its own pid)."""

from __future__ import annotations

from pathlib import Path

from store import connect, queries
from tests.fakes.engines import fake_launch, fake_spec
from tuning import effective
from tuning.effective import stored_mismatches
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.server import ServerProcess, parse_startup_log
from tuning.workload import Workload

REAL_TOKENS = 3_643_792  # the fake's KV cache at its defaults (8 GiB x 0.9 - 0.25 GiB weights)
QUICK = Workload(num_requests=4, concurrency=2, input_len=8, output_len=4, num_warmups=0)


def test_lines_of_a_pid_outside_the_launch_are_never_facts(tmp_path: Path) -> None:
    with ServerProcess(fake_launch(None, "fake_lines=foreign"), tmp_path / "s.log") as server:
        facts = server.wait_healthy(timeout=30)
    assert facts.kv_cache_tokens == REAL_TOKENS
    assert facts.vllm_version == "0.32.0+fake"
    assert facts.kv_cache_memory_gib is not None and facts.kv_cache_memory_gib < 100
    assert 1 not in facts.engine_pids.values()
    launched = server.pids
    assert set(facts.engine_pids.values()) <= launched
    assert facts.engine_pids["EngineCore"] != facts.engine_pids["APIServer"]
    assert facts.log_read["foreign_lines"] == 3 and facts.log_read["foreign_pids"] == [1]
    assert facts.log_conflicts == []  # lines of another pid are ignored, not weighed


def test_what_the_launchs_own_lines_disagree_on_is_stored_as_a_mismatch(lab_home: Path) -> None:
    db = lab_home / "lab.db"
    exp_id = plan_experiment(
        db,
        param="max-num-seqs",
        values=[4],
        workload=QUICK,
        engine=fake_spec("fake_lines=own"),
    )
    run_experiment(db, exp_id, start_timeout=60)
    with connect(db, readonly=True) as conn:
        (run,) = queries.list_runs(conn, exp_id, include_hidden=True)
    assert run["status"] == "done", (run["failure_kind"], run["failure_reason"])
    assert run["kv_cache_tokens"] == REAL_TOKENS  # the last word is vLLM's own
    assert run["vllm_version"] == "0.32.0+fake"
    found = stored_mismatches(run) or []
    params = {m["param"] for m in found}
    assert {"log:kv_cache_tokens", "log:vllm_version", "log:kv_gib_available"} <= params
    kv = next(m for m in found if m["param"] == "log:kv_cache_tokens")
    assert kv["effective"] == ["999999999", str(REAL_TOKENS)]
    assert kv["source"] == "the server log's own lines"
    assert "999999999" in kv["reason"] and "kept the last" in kv["reason"]
    reasons = effective.mismatch_reasons(found)  # what the Runs page and the findings show
    assert any(r.startswith("KV cache size (tokens): the engine's own log") for r in reasons)


def test_the_last_word_wins_and_only_a_disagreement_is_a_conflict() -> None:
    text = (
        "(EngineCore pid=7) INFO GPU KV cache size: 100 tokens, Maximum concurrency for 10 "
        "tokens per request: 10.00x\n"
        "(EngineCore pid=7) INFO GPU KV cache size: 100 tokens, Maximum concurrency for 10 "
        "tokens per request: 10.00x\n"
        "(Worker_TP0 pid=8) INFO Model loading took 1.5 GiB memory and 2.0 seconds\n"
        "(Worker_TP1 pid=9) INFO Model loading took 1.6 GiB memory and 2.1 seconds\n"
        "(APIServer pid=6) INFO vLLM server version 0.32.0, serving model m\n"
    )
    facts = parse_startup_log(text, pids={6, 7, 8, 9})
    assert facts.kv_cache_tokens == 100 and facts.weights_memory_gib == 1.6
    assert facts.log_conflicts == []  # the same word twice; two workers' own weights
    later = text + "(EngineCore pid=7) INFO GPU KV cache size: 200 tokens\n"
    facts = parse_startup_log(later, pids={6, 7, 8, 9})
    assert facts.kv_cache_tokens == 200 and facts.max_concurrency == 10.0
    (conflict,) = facts.log_conflicts
    assert conflict["fact"] == "kv_cache_tokens" and conflict["values"] == ["100", "200"]
    assert conflict["said_by"] == ["EngineCore pid 7", "EngineCore pid 7"]


def test_a_line_without_vllms_prefix_or_of_another_pid_is_no_fact() -> None:
    text = (
        "GPU KV cache size: 5 tokens\n"  # no prefix: anyone's print
        "(EngineCore pid=99) INFO GPU KV cache size: 6 tokens\n"  # not a process of the launch
        "(EngineCore pid=7) INFO Initializing a V1 LLM engine (v0.32.0) with config: "
        "max_seq_len=2048, dtype=torch.bfloat16\n"
    )
    facts = parse_startup_log(text, pids={7})
    assert facts.kv_cache_tokens is None and facts.vllm_version == "0.32.0"
    assert facts.engine_pids == {"EngineCore": 7}
    assert facts.log_read["foreign_lines"] == 1
    from tuning.log_facts import read_sheet  # (here: the module's other tests run on any lab)

    eff = effective.read_effective(read_sheet(text, {7}), None)
    assert eff.values["max-model-len"] == "2048"
    assert parse_startup_log(text).kv_cache_tokens == 6  # without the launch: any vLLM line
