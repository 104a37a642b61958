"""Preview numbers: counts, token totals, histograms, prefix reuse and arrival stats."""

from __future__ import annotations

import json

from tuning.measure.traffic.materialize import materialize
from tuning.measure.traffic.preview import histogram, preview
from tuning.measure.traffic.spec import (
    Arrival,
    LengthDist,
    MultiTurn,
    SharedPrefixes,
    Source,
    WorkloadSpec,
)
from tuning.measure.traffic.workload import LocalTokenizer


def test_histogram_bins() -> None:
    h = histogram([1, 2, 2, 3, 10])
    assert sum(h["counts"]) == 5 and len(h["edges"]) == len(h["counts"]) + 1
    assert h["min"] == 1 and h["max"] == 10 and h["mean"] == 3.6
    assert histogram([])["counts"] == []


def test_preview_of_a_multi_turn_open_loop(tok: LocalTokenizer) -> None:
    spec = WorkloadSpec(
        input=LengthDist("uniform", 40, range_ratio=0.5),
        output=LengthDist(mean=10),
        prefixes=SharedPrefixes(2, 16),
        multi_turn=MultiTurn(True, LengthDist(mean=2)),
        arrival=Arrival("open", rate=2.0, burstiness=0.5, max_concurrency=4),
        num_requests=20,
    )
    plan = materialize(spec, tok)
    p = preview(plan)
    json.dumps(p)  # plain data
    assert p["requests"] == 20 and p["conversations"] == 10
    assert p["turns"] == {"mean": 2.0, "max": 2, "multi_turn_conversations": 10}
    assert p["tokens"]["output"] == 200
    assert p["tokens"]["input"] == sum(r.input_len for r in plan.requests)
    assert sum(p["input_len"]["counts"]) == 20
    sharing = p["prefix_sharing"]
    assert sharing["requests_with_prefix"] == 20
    # later turns repeat their history; 8 of 10 first turns find their prefix already seen
    later = sum(plan.requests[i - 1].input_len + 10 for i, r in enumerate(plan.requests) if r.turn)
    assert sharing["reusable_tokens"] == later + 8 * 16
    arrival = p["arrival"]
    assert arrival["pattern"] == "gamma" and arrival["target_rate"] == 2.0
    assert arrival["rate"] == 2.0 and arrival["max_concurrency"] == 4


def test_preview_of_a_trace(tok: LocalTokenizer) -> None:
    spec = WorkloadSpec(
        source=Source("trace", "mooncake-small.jsonl"),
        input=None,
        output=None,
        num_requests=40,
        arrival=Arrival("trace", speed=4.0),
    )
    p = preview(materialize(spec, tok))
    assert p["arrival"]["kind"] == "trace" and p["arrival"]["speed"] == 4.0
    assert 0 < p["prefix_sharing"]["reusable_share"] < 1
    assert p["source"] == "trace" and p["requests"] == 40
