"""Issue 11 item 1 on Compare: a side whose value the engine did not apply gets no verdict (never
better / worse / equivalent / undecided), with the reason, in the table, the exports, the CLI text
and the HTML report's words."""

from __future__ import annotations

import json
from typing import Any

from tests.factories import run_row
from tuning.cli.compare import format_comparison
from tuning.compare import present
from tuning.compare.comparison import build_comparison
from tuning.compare.present import table_rows, verdict_text

KV = "kv-cache-memory-bytes"
REAL = {"equivalent", "better", "worse", "undecided"}


def make_run(rid: int, value: str, *, param: str, tput: float = 1000.0, **over: Any) -> dict:
    """A measured run row (tests.factories.run_row): TTFT falls as throughput rises."""
    ttft = 100.0 * 1000.0 / tput
    return run_row(rid, value, ttft=ttft, tput=tput, param=param, kv_cache_tokens=524288, **over)


def mismatch(param: str, asked: Any, effective: Any) -> list[dict[str, Any]]:
    reason = f"{param}: asked {asked}, the engine ran with {effective} (vllm:cache_config_info)"
    return [
        {
            "param": param,
            "asked": asked,
            "effective": effective,
            "source": "vllm:cache_config_info",
            "reason": reason,
        }
    ]


def kv_runs(base_mismatch: Any = None, cand_mismatch: Any = None) -> list[dict[str, Any]]:
    """2 MiB vs 1 GiB, two repeats each, and the same numbers on both sides (as on main)."""
    runs = []
    for rid, value, tput in ((1, "2M", 1000.0), (2, "1G", 1000.0), (3, "2M", 1010.0)):
        runs.append(make_run(rid, value, tput=tput, param=KV, config_mismatch=[]))
    runs.append(make_run(4, "1G", tput=1012.0, param=KV, config_mismatch=[]))
    for r in runs:
        if r["value"] == "2M" and base_mismatch is not None:
            r["config_mismatch"] = base_mismatch
        if r["value"] == "1G" and cand_mismatch is not None:
            r["config_mismatch"] = cand_mismatch
    return runs


def verdicts(cmp: Any) -> set[str]:
    return {ch.verdict for ch in cmp.changes.values()}


def test_all_applied_gets_the_usual_verdicts() -> None:
    cmp = build_comparison(kv_runs(), [1, 3])
    assert verdicts(cmp) <= REAL and not cmp.baseline.not_applied
    assert present.not_applied_text(cmp) is None


def test_a_baseline_value_the_engine_ignored_gives_no_verdict() -> None:
    """The measured defect: 2M was overridden by the env, both sides ran 1 GiB of KV cache."""
    cmp = build_comparison(kv_runs(base_mismatch=mismatch(KV, "2 MiB", "1 GiB")), [1, 3])
    assert verdicts(cmp) == {"not applied"}
    assert (
        len(cmp.baseline.not_applied) == 2
        and "run 1: kv-cache-memory-bytes" in (cmp.baseline.not_applied[0])
    )
    ch = next(iter(cmp.changes.values()))
    assert ch.rel_change is None and ch.rel_low is None
    assert verdict_text(ch).startswith("⊘ not applied (not applied by the engine: run 1:")
    text = present.not_applied_text(cmp)
    assert text is not None and "kv-cache-memory-bytes = 2 MiB" in text
    # the table, the JSON/CSV rows and the CLI text say the same, with no other verdict
    cells = [c.text for row in table_rows(cmp) for c in row]
    assert not any(c.startswith(("▲", "▼", "≈", "?")) for c in cells)
    rows = cmp.rows()
    assert {r["verdict"] for r in rows if r["role"] == "candidate"} == {"not applied"}
    assert any("run 1" in (r["not_applied"] or "") for r in rows if r["role"] == "baseline")
    assert json.loads(json.dumps(cmp.to_json()))["baseline"]["not_applied"]
    cli = format_comparison(cmp).splitlines()
    assert any(line.startswith("Not applied by the engine") for line in cli)
    metric_lines = [line for line in cli if line.startswith("  ") and "%" not in line[:2]]
    judged = [line for line in metric_lines if line.rstrip().endswith(tuple(REAL))]
    assert not judged and any(line.rstrip().endswith("not applied") for line in metric_lines)


def test_a_candidate_value_the_engine_ignored_gives_no_verdict_for_that_side_only() -> None:
    runs = kv_runs(cand_mismatch=mismatch(KV, "1 GiB", "7.7 GiB"))
    runs.append(make_run(5, "8M", param=KV, config_mismatch=[]))
    runs.append(make_run(6, "8M", tput=1005.0, param=KV, config_mismatch=[]))
    cmp = build_comparison(runs, [1, 3])
    by_side = {
        side.value: {cmp.changes[(side.label, m.key)].verdict for m in cmp.metrics}
        for side in cmp.candidates
    }
    assert by_side["1G"] == {"not applied"}
    assert by_side["8M"] <= REAL


def test_a_mismatch_on_a_parameter_that_does_not_differ_keeps_the_verdict() -> None:
    """Both sides lost the same baseline flag: the comparison of the changed one still holds."""
    same = mismatch("max-num-seqs", 16, "256")
    cmp = build_comparison(kv_runs(base_mismatch=same, cand_mismatch=same), [1, 3])
    assert verdicts(cmp) <= REAL and not cmp.baseline.not_applied


def test_runs_never_checked_are_judged_as_before() -> None:
    runs = kv_runs()
    for r in runs:
        r.pop("config_mismatch")
    assert verdicts(build_comparison(runs, [1, 3])) <= REAL


def test_a_hostile_stored_mismatch_cannot_break_the_comparison() -> None:
    """config_mismatch comes from the DB, maybe from a teammate's bundle: odd shapes are ignored."""
    runs = kv_runs(base_mismatch=[{"param": ["x"]}, "text", 3, {"reason": "no param"}, None])
    runs[1]["config_mismatch"] = {"param": KV}
    assert verdicts(build_comparison(runs, [1, 3])) <= REAL
