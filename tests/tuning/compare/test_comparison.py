"""A comparison of stored runs: sides grouped by value, what is not comparable left out, failed
starts shown, goodput recomputed from request rows for an SLO, and SLOs parsed."""

from __future__ import annotations

import numpy as np
import pytest

from core.records import RequestRecord
from tests.factories import record
from tests.factories import run_row as run
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.measure.metrics import columns, parse_slo


def test_comparison_groups_sides_and_leaves_out_what_is_not_comparable() -> None:
    runs = []
    rng = np.random.default_rng(0)
    rid = 0
    for rep in range(5):
        for value, ttft in ((2, 100.0), (16, 110.0)):
            rid += 1
            runs.append(run(rid, value, ttft=ttft * (1 + rng.normal(0, 0.01)), repeat_index=rep))
    runs.append(run(99, 16, hardware="other"))
    runs.append(run(100, 64, status="failed", completed=None, failure_kind="oom"))
    runs.append(run(101, 32, status="running"))
    base_ids = default_baseline(runs)
    assert base_ids == [r["id"] for r in runs if r["value"] == "2"]
    cmp = build_comparison(runs, base_ids)
    assert cmp.param == "max-num-seqs"
    assert cmp.baseline.label == "max-num-seqs = 2"
    labels = [s.label for s in cmp.candidates]
    assert labels == ["max-num-seqs = 16", "max-num-seqs = 64"]
    assert {c.run_id for c in cmp.excluded} == {99, 101}
    sixteen = cmp.candidates[0]
    assert len(sixteen.measured_ids) == 5
    assert cmp.changes[("max-num-seqs = 16", "mean_ttft_ms")].verdict == "worse"
    assert cmp.changes[("max-num-seqs = 16", "kv_cache_tokens")].verdict == "equivalent"
    failed = cmp.candidates[1]
    assert failed.failed[0]["kind"] == "oom"
    assert cmp.changes[("max-num-seqs = 64", "mean_ttft_ms")].verdict == "undecided"
    rows = cmp.rows()
    assert {r["verdict"] for r in rows if r["role"] == "baseline"} == {None}
    # swapped roles: 16 is the baseline now, 2 reads as better
    swapped = build_comparison(
        runs, [r["id"] for r in runs if r["value"] == "16" and r["hardware"] == "cpu"]
    )
    assert swapped.changes[("max-num-seqs = 2", "mean_ttft_ms")].verdict == "better"


def test_goodput_is_recomputed_from_request_rows() -> None:
    def recs(ttft: float) -> list[RequestRecord]:
        return [record(i, 0.0, ttft, [0.1] * 5, 6, 8) for i in range(10)]

    fast, slow = columns(recs(0.1)), columns(recs(0.9))
    runs = [run(1, 2), run(2, 2), run(3, 16), run(4, 16)]
    loader = {1: fast, 2: fast, 3: slow, 4: slow}
    cmp = build_comparison(runs, [1, 2], slo_ms={"ttft": 500}, requests=loader.__getitem__)
    assert cmp.baseline.values["request_goodput"] == [1.0, 1.0]  # 10 good / 10 s
    assert cmp.candidates[0].values["request_goodput"] == [0.0, 0.0]
    assert cmp.changes[("max-num-seqs = 16", "request_goodput")].verdict == "worse"
    no_slo = build_comparison(runs, [1, 2], requests=loader.__getitem__)
    assert "request_goodput" not in {m.key for m in no_slo.metrics}


def test_parse_slo() -> None:
    assert parse_slo(["ttft:500", "tpot:20,e2el:3000"]) == {
        "ttft": 500.0,
        "tpot": 20.0,
        "e2el": 3000.0,
    }
    for bad in (["itl:5"], ["ttft"], ["ttft:x"], ["ttft:-1"], ["ttft:nan"]):
        with pytest.raises(ValueError):
            parse_slo(bad)
