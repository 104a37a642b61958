"""Comparability and the verdict rule: runs as the bootstrap unit, one run is never a verdict,
A/A is equivalent or undecided, and swapping baseline and candidate flips the verdict."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from core.records import RequestRecord
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.comparability import check_pair, parameter_diff
from tuning.compare.comparison import build_comparison, default_baseline, parse_slo
from tuning.compare.stats import bootstrap_change, noise_floor
from tuning.metrics import columns

WORKLOAD = {
    "num_requests": 64,
    "concurrency": 16,
    "input_len": 64,
    "output_len": 64,
    "shared_prefix_len": 0,
    "endpoint": "completions",
    "seed": 0,
    "num_warmups": None,
    "request_timeout_s": 600.0,
}


def run(
    rid: int,
    value: Any = 16,
    *,
    ttft: float = 100.0,
    tput: float = 1000.0,
    param: str = "max-num-seqs",
    status: str = "done",
    **over: Any,
) -> dict[str, Any]:
    config = {"max-num-seqs": 16, "block-size": 32}
    workload = dict(WORKLOAD)
    if param in ("concurrency", "input-len", "output-len", "shared-prefix-len"):
        workload[param.replace("-", "_")] = value
    else:
        config[param] = value
    row = {
        "id": rid,
        "experiment_id": 1,
        "seq": rid,
        "repeat_index": 0,
        "param": param,
        "value": str(value),
        "status": status,
        "config": config,
        "workload": workload,
        "workload_fingerprint": "fp",
        "model": "tiny",
        "engine": "embedded",
        "vllm_version": "0.32.0",
        "hardware": "cpu",
        "completed": 64,
        "failed": 0,
        "duration": 10.0,
        "mean_ttft_ms": ttft,
        "median_ttft_ms": ttft * 0.9,
        "p99_ttft_ms": ttft * 2,
        "output_throughput": tput,
        "mean_tpot_ms": 5.0,
        "peak_tree_rss_bytes": 2 * 2**30,
        "kv_cache_tokens": 8192,
        "preemptions": 0,
    }
    row.update(over)
    return row


def sides(noise: float, shift: float, n: int = 5, seed: int = 3) -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(seed)
    base = list(100.0 * (1 + rng.normal(0, noise, n)))
    cand = list(100.0 * (1 + shift) * (1 + rng.normal(0, noise, n)))
    return base, cand


# --- the verdict rule ---------------------------------------------------------------------------


def test_aa_is_equivalent_or_undecided() -> None:
    base, cand = sides(noise=0.01, shift=0.0)
    for better in ("lower", "higher"):
        assert bootstrap_change(base, cand, better).verdict in ("equivalent", "undecided")
    same = [100.0, 101.0, 99.0]
    ch = bootstrap_change(same, list(same))
    assert ch.verdict in ("equivalent", "undecided") and ch.rel_change == 0.0


def test_aa_over_many_seeds_rarely_claims_a_difference() -> None:
    # better/worse means the 95 % interval excludes 0: about 5 % of A/A comparisons, no more
    wrong = 0
    for seed in range(400):
        base, cand = sides(noise=0.01, shift=0.0, seed=seed)
        wrong += bootstrap_change(base, cand, resamples=500).verdict in ("better", "worse")
    assert wrong <= 24


def test_ten_percent_latency_increase_with_repeats_is_worse() -> None:
    base, cand = sides(noise=0.01, shift=0.10)
    ch = bootstrap_change(base, cand, "lower")
    assert ch.verdict == "worse"
    assert ch.rel_change == pytest.approx(0.10, abs=0.02)
    assert ch.rel_low is not None and ch.rel_high is not None
    assert 0 < ch.rel_low < ch.rel_change < ch.rel_high
    # the same numbers as throughput (higher is better) read as better
    assert bootstrap_change(base, cand, "higher").verdict == "better"


def test_one_run_per_side_is_never_better_or_worse() -> None:
    assert bootstrap_change([100.0], [200.0]).verdict == "undecided"
    assert bootstrap_change([100.0, 100.5, 99.5], [200.0]).verdict == "undecided"
    assert bootstrap_change([100.0], [200.0, 201.0, 199.0]).verdict == "undecided"
    assert bootstrap_change([], [1.0, 2.0]).verdict == "undecided"


def test_swapping_baseline_and_candidate_flips_the_verdict() -> None:
    for shift in (0.10, -0.07, 0.03):
        base, cand = sides(noise=0.01, shift=shift)
        a = bootstrap_change(base, cand, "lower")
        b = bootstrap_change(cand, base, "lower")
        flip = {"better": "worse", "worse": "better"}
        assert b.verdict == flip.get(a.verdict, a.verdict)
        assert a.diff_low == pytest.approx(-b.diff_high) and a.diff_high == pytest.approx(
            -b.diff_low
        )


def test_tiny_but_consistent_change_is_equivalent() -> None:
    base = [100.0, 100.01, 99.99, 100.0, 100.02]
    cand = [100.5, 100.51, 100.49, 100.5, 100.52]  # +0.5 %: real, but inside the ±2 % margin
    assert bootstrap_change(base, cand).verdict == "equivalent"


def test_zero_baseline_counts() -> None:
    ch = bootstrap_change([0, 0, 0], [3, 4, 5], "lower")  # preemptions appear
    assert ch.verdict == "worse" and ch.rel_change is None
    assert bootstrap_change([0, 0], [0, 0]).verdict == "equivalent"


def test_noise_floor() -> None:
    nf = noise_floor([100.0, 102.0, 98.0, 101.0, 99.0])
    assert nf.n == 5 and nf.cv == pytest.approx(np.std([100, 102, 98, 101, 99], ddof=1) / 100)
    assert nf.min_detectable == pytest.approx(1.96 * nf.cv * np.sqrt(2 / 5), rel=1e-3)
    assert noise_floor([5.0]).min_detectable is None


# --- comparability --------------------------------------------------------------------------------


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
        return [
            RequestRecord(
                index=i,
                start=0.0,
                ttft=ttft,
                end=ttft + 0.5,
                itl=[0.1] * 5,
                prompt_tokens=8,
                output_tokens=6,
                ok=True,
            )
            for i in range(10)
        ]

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


def test_metric_directions() -> None:
    lower = {
        "mean_ttft_ms",
        "p99_e2el_ms",
        "peak_tree_rss_bytes",
        "failed",
        "preemptions",
        "time_to_healthy_s",
    }
    higher = {"output_throughput", "request_goodput", "kv_cache_tokens"}
    assert all(METRIC_BY_KEY[k].better == "lower" for k in lower)
    assert all(METRIC_BY_KEY[k].better == "higher" for k in higher)
