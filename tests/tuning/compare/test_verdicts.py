"""Issue 13, item 1: three verdicts, never confused. better / worse when the interval of the change
excludes 0, equivalent when it lies within ±E %, undecided otherwise, with the number of further
repeats a side that would likely decide it. The chart whiskers are the verdict's own interval."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from store import connect, snapshot
from tuning.compare import stats
from tuning.compare.comparison import build_comparison
from tuning.compare.present import verdict_rule, verdict_text
from tuning.compare.selection import select_runs
from tuning.compare.stats import bootstrap_change, change_interval, mean_interval

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "examples" / "h200" / "lab-h200.db.xz"  # committed compressed (store.snapshot)
OLD_WORDS = ("no clear difference", "inconclusive")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _draws(mean: float, cv: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(mean * (1 + rng.normal(0, cv, n)))


# --- the committed H200 example -----------------------------------------------------------------


def test_h200_tpot_change_is_worse_or_undecided_with_a_repeat_estimate() -> None:
    before = _digest(H200)
    with connect(snapshot.expanded(H200), readonly=True) as db:
        cmp = select_runs(db, experiment_ids=[2]).comparison
    assert _digest(H200) == before  # opened read-only: the committed file does not change
    ch = cmp.changes[("max-num-seqs = 256", "mean_tpot_ms")]
    assert ch.base_mean == pytest.approx(2.09, abs=0.01)
    assert ch.cand_mean == pytest.approx(11.47, abs=0.01)
    assert ch.verdict in ("worse", "undecided")
    if ch.verdict == "undecided":
        assert ch.more is not None and ch.more.runs is not None and 1 <= ch.more.runs <= 5
        assert "more run" in verdict_text(ch)
    for (_, key), change in cmp.changes.items():
        # "changed": a real change of a metric with no better direction (peak KV usage)
        allowed = ("changed",) if key == "peak_kv_cache_usage_perc" else ()
        assert change.verdict in ("better", "worse", "equivalent", "undecided", *allowed)


def test_h200_cli_never_says_the_old_words_and_leaves_the_file_alone() -> None:
    before = _digest(H200)
    out = subprocess.run(
        [sys.executable, "-m", "tuning", "compare", "--db", str(H200), "--experiment", "2"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert _digest(H200) == before
    assert not any(w in out.stdout for w in OLD_WORDS)
    tpot = next(line for line in out.stdout.splitlines() if line.strip().startswith("mean TPOT"))
    assert ("worse" in tpot) or ("undecided" in tpot and "more run" in tpot)
    assert "±2 %" in out.stdout  # the equivalence margin is shown


def test_aa_of_stored_repeats_is_equivalent_or_undecided() -> None:
    with connect(snapshot.expanded(H200), readonly=True) as db:
        # runs 5 and 7 are repeats of one configuration: an A/A comparison through the CLI's path
        cmp = select_runs(db, run_ids=[5, 7], baseline_ids=[5]).comparison
        assert cmp.candidates and "A/A" in cmp.candidates[0].label
        assert {c.verdict for c in cmp.changes.values()} <= {"equivalent", "undecided"}
        both = select_runs(db, experiment_ids=[1, 2]).comparison
    # and each stored pair of repeats, one run against the other, on the main metrics
    for side in both.sides:
        for key in ("output_throughput", "mean_ttft_ms", "mean_tpot_ms"):
            vals = side.values[key]
            if len(vals) >= 2:
                ch = bootstrap_change(vals[:1], vals[1:2])
                assert ch.verdict == "undecided" and ch.more is not None


# --- the rule ---------------------------------------------------------------------------------


def test_three_verdicts() -> None:
    base = _draws(100.0, 0.002, 6, seed=1)
    same = _draws(100.0, 0.002, 6, seed=2)
    assert bootstrap_change(base, same).verdict == "equivalent"
    assert bootstrap_change(base, _draws(120.0, 0.002, 6, seed=3), "lower").verdict == "worse"
    assert bootstrap_change(base, _draws(120.0, 0.002, 6, seed=3), "higher").verdict == "better"
    noisy = bootstrap_change(_draws(100.0, 0.2, 3, seed=4), _draws(100.0, 0.2, 3, seed=5))
    assert noisy.verdict == "undecided" and noisy.more is not None


def test_a_real_change_inside_the_margin_is_equivalent() -> None:
    base = [100.0, 100.01, 99.99, 100.0, 100.02]
    cand = [100.5, 100.51, 100.49, 100.5, 100.52]  # +0.5 %: real, inside ±2 %
    assert bootstrap_change(base, cand).verdict == "equivalent"
    # a margin of 0.1 % makes the same numbers a decided change
    assert bootstrap_change(base, cand, margin=0.001).verdict == "worse"


def test_one_run_a_side_is_undecided_with_a_repeat_estimate() -> None:
    for b, c in (([100.0], [200.0]), ([100.0, 100.5, 99.5], [200.0]), ([100.0], [1.0, 2.0])):
        ch = bootstrap_change(b, c)
        assert ch.verdict == "undecided" and ch.more is not None and ch.more.runs is not None
        assert ch.rel_low is None
    one_each = bootstrap_change([100.0], [200.0])
    assert one_each.more is not None and one_each.more.runs == 1  # the spread is unknown yet
    # with the other side's spread known, the estimate uses it: a big change needs few runs
    known = bootstrap_change([100.0, 101.0, 99.0], [200.0])
    assert known.more is not None and known.more.runs is not None and known.more.runs <= 2
    empty = bootstrap_change([], [1.0, 2.0])
    assert empty.verdict == "undecided"


def test_the_repeat_estimate_usually_decides() -> None:
    decided = tried = 0
    for seed in range(30):
        b, c = _draws(100.0, 0.15, 3, seed), _draws(140.0, 0.15, 3, seed + 100)
        ch = bootstrap_change(b, c, "lower")
        if ch.verdict != "undecided" or ch.more is None or ch.more.runs is None:
            continue
        k = ch.more.runs
        more_b, more_c = _draws(100.0, 0.15, k, seed + 200), _draws(140.0, 0.15, k, seed + 300)
        tried += 1
        decided += bootstrap_change(b + more_b, c + more_c, "lower").verdict != "undecided"
    assert tried >= 5 and decided / tried >= 0.6


def test_hopeless_is_many() -> None:
    # a 1 % change under 30 % noise: no sane number of repeats decides it
    b, c = [70.0, 100.0, 130.0, 100.0], [71.0, 101.0, 131.0, 101.0]
    ch = bootstrap_change(b, c)
    assert ch.verdict == "undecided" and ch.more is not None and ch.more.runs is None
    assert "many" in verdict_text(ch)


def test_swapping_sides_flips_better_and_worse() -> None:
    b, c = _draws(100.0, 0.01, 5, seed=1), _draws(110.0, 0.01, 5, seed=2)
    a, z = bootstrap_change(b, c), bootstrap_change(c, b)
    assert {a.verdict, z.verdict} == {"better", "worse"}
    assert a.log_low == pytest.approx(-z.log_high) and a.log_high == pytest.approx(-z.log_low)


def test_zero_counts() -> None:
    assert bootstrap_change([0, 0], [0, 0]).verdict == "equivalent"
    assert bootstrap_change([0, 0, 0], [3, 4, 5], "lower").verdict == "worse"


# --- one interval for verdicts and whiskers -------------------------------------------------------


def test_two_runs_get_an_honest_interval_not_their_min_max() -> None:
    vals = [13.23, 9.71]
    lo, hi = mean_interval(vals) or (0.0, 0.0)
    assert lo < min(vals) - 5 and hi > max(vals) + 5  # Student's t with 1 df, not min..max
    assert mean_interval([5.0]) is None


def test_chart_whiskers_are_the_verdict_interval() -> None:
    from tuning.present.charts.common import side_frame
    from tuning.present.charts.compare import bar_chart

    runs = []
    for i, (value, tput) in enumerate(((2, 1000.0), (2, 1100.0), (16, 4000.0), (16, 4600.0))):
        runs.append(_run(i + 1, value, tput))
    cmp = build_comparison(runs, [1, 2])
    frame = side_frame(cmp, ["output_throughput"])
    for side in cmp.sides:
        row = frame[frame["side"].str.startswith(side.value or "")].iloc[0]
        expected = mean_interval(side.values["output_throughput"])
        assert expected is not None and (row["low"], row["high"]) == pytest.approx(expected)
    # the interval of the change is the same function on both sides
    ch = cmp.changes[("max-num-seqs = 16", "output_throughput")]
    pair = change_interval(
        cmp.baseline.values["output_throughput"], cmp.candidates[0].values["output_throughput"]
    )
    assert pair is not None and pair[0] == ch.scale == "log"
    assert (ch.log_low, ch.log_high) == pytest.approx(pair[1:])
    subtitle = " ".join(bar_chart(cmp, "output_throughput").to_dict()["title"]["subtitle"])
    assert "Student" in subtitle and "bootstrap" in subtitle and "verdict" in subtitle


def test_margin_is_settable_and_shown() -> None:
    runs = [_run(1, 2, 1000.0), _run(2, 2, 1001.0), _run(3, 16, 1050.0), _run(4, 16, 1051.0)]
    tight = build_comparison(runs, [1, 2])
    loose = build_comparison(runs, [1, 2], margin=0.10)
    key = ("max-num-seqs = 16", "output_throughput")
    assert tight.changes[key].verdict == "better"
    assert loose.changes[key].verdict == "equivalent"
    data = loose.to_json()
    assert data["verdict_rule"]["equivalence_margin"] == pytest.approx(0.10)
    row = next(r for r in data["rows"] if r["side"] == key[0] and r["metric"] == key[1])
    assert row["verdict"] == "equivalent" and row["equivalence_margin_pct"] == pytest.approx(10)
    assert "±10 %" in verdict_rule(margin=0.10)


def test_the_old_words_are_gone_from_the_lab() -> None:
    roots = [REPO / "tuning", REPO / "ui", REPO / "app_pages", REPO / "app.py"]
    files = [p for r in roots for p in ([r] if r.is_file() else r.rglob("*.py"))]
    for path in files:
        text = path.read_text()
        for word in OLD_WORDS:
            assert word not in text, f"{path.relative_to(REPO)} still says {word!r}"
    assert set(stats.VERDICTS) == {
        "better",
        "worse",
        "changed",
        "equivalent",
        "undecided",
        "not applied",
    }


def _run(rid: int, value: int, tput: float) -> dict[str, object]:
    return {
        "id": rid,
        "experiment_id": 1,
        "seq": rid,
        "repeat_index": 0,
        "param": "max-num-seqs",
        "value": str(value),
        "status": "done",
        "config": {"max-num-seqs": value},
        "workload": {"num_requests": 8, "concurrency": 4},
        "workload_fingerprint": "fp",
        "model": "tiny",
        "engine": "embedded",
        "vllm_version": "0.32.0",
        "hardware": "cpu",
        "completed": 8,
        "failed": 0,
        "duration": 10.0,
        "output_throughput": tput,
    }
