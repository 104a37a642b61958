"""What a workload will send, as plain numbers for a preview (the UI and CLI draw them).

`preview(plan)` returns a JSON-ready dict: counts (requests, conversations, turns), token totals,
input and output length histograms (bin edges and counts) with their statistics, prefix sharing,
and the arrival pattern with the schedule's planned duration (at least: answers take their time on
top) and its cap. "Reusable" tokens are those a prefix cache could serve if nothing were
evicted: a shared system prompt seen before, the history a later turn repeats, and a trace's hash
blocks seen before; the real hit rate comes from the server's /metrics during the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tuning.measure.traffic.arrival import MAX_SCHEDULE_S, gap_stats
from tuning.measure.traffic.materialize import Schedule, planned_duration_s
from tuning.measure.traffic.request import PlannedRequest

_BINS = 20


def histogram(values: Sequence[int], bins: int = _BINS) -> dict[str, Any]:
    """Equal-width integer bins: `edges` has one more entry than `counts`; plus summary stats."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return {"edges": [], "counts": [], "mean": 0.0, "std": 0.0, "min": 0, "max": 0}
    lo, hi = float(arr.min()), float(arr.max())
    counts, edges = np.histogram(arr, bins=min(bins, int(hi - lo) + 1), range=(lo, hi + 1))
    return {
        "edges": [float(e) for e in edges],
        "counts": [int(c) for c in counts],
        "mean": float(arr.mean()),
        "std": float(arr.std()),
        "min": int(lo),
        "max": int(hi),
        "p50": float(np.percentile(arr, 50)),
        "p90": float(np.percentile(arr, 90)),
        "p99": float(np.percentile(arr, 99)),
    }


def reusable_tokens(requests: Sequence[PlannedRequest], block_size: int) -> int:
    """Input tokens a prefix cache could serve from earlier requests (see the module docstring)."""
    seen_prefixes: set[int] = set()
    seen_blocks: set[int] = set()
    last_len: dict[int, int] = {}
    total = 0
    for r in requests:
        if r.turn > 0:
            # the previous turn's whole prompt plus its answer come back as history
            total += last_len.get(r.conversation, 0)
        elif r.prefix_id is not None:
            if r.prefix_id in seen_prefixes:
                total += r.messages[0].tokens
            seen_prefixes.add(r.prefix_id)
        leading = True  # a cache serves the leading run of blocks it has seen
        for k, h in enumerate(r.hash_ids):
            leading = leading and h in seen_blocks
            if leading:
                total += min(block_size, r.input_len - k * block_size)
            seen_blocks.add(h)
        last_len[r.conversation] = r.input_len + r.output_len
    return total


def preview(plan: Schedule) -> dict[str, Any]:
    """The preview numbers of a plan (see the module docstring)."""
    spec = plan.spec
    reqs = plan.requests
    ins = [r.input_len for r in reqs]
    outs = [r.output_len for r in reqs]
    per_conv: dict[int, int] = {}
    for r in reqs:
        per_conv[r.conversation] = per_conv.get(r.conversation, 0) + 1
    total_in = sum(ins)
    reusable = reusable_tokens(reqs, spec.source.block_size)
    arrival: dict[str, Any] = {"kind": spec.arrival.kind}
    if spec.arrival.kind == "closed":
        arrival["concurrency"] = spec.arrival.concurrency
    else:
        offsets = [r.offset_s for r in reqs if r.offset_s is not None]
        arrival.update(gap_stats(offsets))
        arrival["max_concurrency"] = spec.arrival.max_concurrency
        if spec.arrival.kind == "open":
            arrival["target_rate"] = spec.arrival.rate
            arrival["burstiness"] = spec.arrival.burstiness
            arrival["pattern"] = "poisson" if spec.arrival.burstiness == 1 else "gamma"
        else:
            arrival["speed"] = spec.arrival.speed
    # the least time the schedule takes (starts and think time; answers come on top), and its cap
    arrival["planned_s"] = planned_duration_s(reqs)
    arrival["cap_s"] = MAX_SCHEDULE_S
    turns = list(per_conv.values())
    return {
        "source": spec.source.kind,
        "requests": len(reqs),
        "conversations": len(per_conv),
        "turns": {
            "mean": float(np.mean(turns)) if turns else 0.0,
            "max": max(turns, default=0),
            "multi_turn_conversations": sum(t > 1 for t in turns),
        },
        "tokens": {"input": total_in, "output": sum(outs), "total": total_in + sum(outs)},
        "input_len": histogram(ins),
        "output_len": histogram(outs),
        "prefix_sharing": {
            "prefixes": spec.prefixes.count,
            "prefix_len": spec.prefixes.length,
            "requests_with_prefix": sum(r.prefix_id is not None for r in reqs),
            "reusable_tokens": reusable,
            "reusable_share": reusable / total_in if total_in else 0.0,
        },
        "arrival": arrival,
        "skipped": plan.skipped,
        "truncated_turns": plan.truncated_turns,
        "oversampled": plan.oversampled,
    }
