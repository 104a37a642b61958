"""Issue 23, item 1: the headline decision, one sentence per candidate: the decided metrics with
their change and verdict in the catalogue's order, the rest counted, the undecided and the
equivalent ones folded into one count each, and the recommendation when the lab makes one."""

from __future__ import annotations

from pathlib import Path

from store import connect, snapshot
from tests.factories import run_row
from tuning.compare.comparison import build_comparison
from tuning.compare.defaults import EngineDefault
from tuning.compare.headline import NAMED, headline
from tuning.compare.prefer import Preference
from tuning.compare.selection import select_runs

REPO = Path(__file__).resolve().parents[3]
DECISIONS = REPO / "examples" / "h200" / "lab-h200-decisions.db.xz"


def _mixed_runs() -> list[dict[str, object]]:
    """Two runs a side (baseline 1, 2 at max-num-seqs 16): output throughput +14 % under ~20 %
    noise (undecided), mean TTFT -50 % (better), mean TPOT +20 % (worse), the rest unchanged
    (equivalent)."""
    return [
        run_row(1, 16, tput=1000.0, ttft=100.0, mean_tpot_ms=5.0),
        run_row(2, 16, tput=1400.0, ttft=101.0, mean_tpot_ms=5.02),
        run_row(3, 64, tput=1100.0, ttft=50.0, mean_tpot_ms=6.0),
        run_row(4, 64, tput=1640.0, ttft=50.5, mean_tpot_ms=6.03),
    ]


def test_the_h200_decision_in_one_sentence() -> None:
    """Experiment 1 of the committed H200 example: kv-cache-memory-bytes 1G vs 16G."""
    with connect(snapshot.expanded(DECISIONS), readonly=True) as db:
        selection = select_runs(db, experiment_ids=[1], with_repeats=True)
    lead = headline(selection.comparison, selection.preference)
    assert lead.sentences == [
        "kv-cache-memory-bytes 16 GiB vs 1 GiB: output throughput +212.6 % (better), "
        "mean TTFT -95.6 % (better), mean TPOT +31.6 % (worse); 14 more decided (9 better, "
        "5 worse); 3 metrics undecided; 1 equivalent"
    ]
    one = lead.candidates[0]
    assert [m.key for m in one.undecided] == [
        "p99_tpot_ms",
        "peak_tree_rss_bytes",
        "time_to_healthy_s",
    ]
    assert [m.key for m in one.equivalent] == ["failed"]
    # every metric is counted once: named + more + undecided + equivalent
    assert len(one.decided) + len(one.undecided) + len(one.equivalent) == len(
        selection.comparison.metrics
    )
    assert selection.preference.kind == "none" and lead.recommendation is None
    assert lead.lines == lead.sentences  # no default known: nothing recommended


def test_a_scripted_mix_of_verdicts() -> None:
    cmp = build_comparison(_mixed_runs(), [1, 2])
    verdicts = {k: c.verdict for (_, k), c in cmp.changes.items()}
    assert verdicts["output_throughput"] == "undecided"
    assert verdicts["mean_ttft_ms"] == "better" and verdicts["mean_tpot_ms"] == "worse"
    lead = headline(cmp)
    # named in the catalogue's order (mean TTFT, p50 TTFT, mean TPOT), p99 TTFT counted, output
    # throughput undecided, the unchanged ones equivalent
    assert lead.sentences == [
        "max-num-seqs 64 vs 16: mean TTFT -50.0 % (better), p50 TTFT -50.0 % (better), "
        "mean TPOT +20.1 % (worse); 1 more decided (1 better); 1 metric undecided; 4 equivalent"
    ]
    one = lead.candidates[0]
    assert [d.metric.key for d in one.more] == ["p99_ttft_ms"]
    assert [m.key for m in one.undecided] == ["output_throughput"]
    assert {m.key for m in one.equivalent} == {
        "kv_cache_tokens",
        "preemptions",
        "failed",
        "peak_tree_rss_bytes",
    }
    data = one.to_json()
    assert data["sentence"] == lead.sentences[0] and data["undecided"] == ["output_throughput"]
    assert [(d["metric"], d["verdict"]) for d in data["decided"]][:2] == [
        ("mean_ttft_ms", "better"),
        ("median_ttft_ms", "better"),
    ]


def test_without_a_decided_lead_metric_the_first_decided_ones_are_named() -> None:
    """The lead metrics noisy: the decided ones (p50 and p99 TTFT) are named, up to NAMED."""
    rows = _mixed_runs()
    for row in rows:  # the lead metrics the same on both sides, noisy
        row["mean_ttft_ms"] = 100.0 + row["id"] % 2  # type: ignore[operator]
        row["mean_tpot_ms"] = 5.0 + (row["id"] % 2) * 0.5  # type: ignore[operator]
    cmp = build_comparison(rows, [1, 2])
    one = headline(cmp).candidates[0]
    assert not any(d.metric.key in ("mean_ttft_ms", "mean_tpot_ms") for d in one.decided)
    assert [d.metric.key for d in one.named] == [d.metric.key for d in one.decided][:NAMED]
    assert one.sentence == (
        "max-num-seqs 64 vs 16: p50 TTFT -50.0 % (better), p99 TTFT -50.0 % (better); "
        "3 metrics undecided; 4 equivalent"
    )


def test_the_recommendation_follows_the_sentences() -> None:
    cmp = build_comparison(_mixed_runs(), [1, 2])
    default = EngineDefault("max-num-seqs", 16, "the lab's table", True)

    def pref(kind: str, text: str) -> Preference:
        return Preference("max-num-seqs", default, kind, "16", text, 0.02, ())  # type: ignore[arg-type]

    keep = headline(cmp, pref("default", "Keep vLLM's default max-num-seqs = 16: fewer flags."))
    assert keep.lines[-1] == "Recommendation: Keep vLLM's default max-num-seqs = 16: fewer flags."
    assert len(keep.lines) == len(keep.sentences) + 1
    assert headline(cmp, pref("none", "Cannot prefer vLLM's default.")).recommendation is None


def test_no_candidate_no_sentence_and_a_not_applied_side_says_so() -> None:
    assert headline(build_comparison(_mixed_runs()[:2], [1, 2])).lines == []
    rows = _mixed_runs()
    for row in rows[2:]:  # the engine ran 16 although 64 was asked
        row["config_mismatch"] = [
            {
                "param": "max-num-seqs",
                "asked": 64,
                "effective": 16,
                "source": "vllm:cache_config_info",
                "reason": "max-num-seqs: asked 64, the engine ran with 16",
            }
        ]
    lead = headline(build_comparison(rows, [1, 2]))
    assert lead.sentences == ["max-num-seqs 64 vs 16: not applied by the engine, so no verdict"]
    assert lead.candidates[0].to_json()["not_applied"] is True
