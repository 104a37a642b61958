"""A fact the launch's own log lines disagree on is stored as a mismatch (issue 41, case 2): an
engine that printed vLLM-like lines before vLLM's own got KV tokens 999,999,999 (real 3,643,792)
and version 9.9.9-evil stored, the run `done` with no mismatch. The fake vLLM's `fake_lines=own`
prints them with its own pid, so only the disagreement can tell: the last (vLLM's) value is kept,
and the run carries a config mismatch (what Runs, findings, reuse and repeats read)."""

from __future__ import annotations

from pathlib import Path

from store import connect, queries
from tests.fakes.engines import fake_spec
from tuning.engine import effective
from tuning.engine.effective import stored_mismatches
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

REAL_TOKENS = 3_643_792  # the fake's KV cache at its defaults (8 GiB x 0.9 - 0.25 GiB weights)
QUICK = Workload(num_requests=4, concurrency=2, input_len=8, output_len=4, num_warmups=0)


def test_what_the_launchs_own_lines_disagree_on_is_stored_as_a_mismatch(lab_home: Path) -> None:
    db = lab_home / "lab.db"
    exp_id = plan_experiment(
        db,
        ExperimentSpec.build(
            param="max-num-seqs", values=[4], workload=QUICK, engine=fake_spec("fake_lines=own")
        ),
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
