"""Fingerprints: did two runs replay the same workload?

`fingerprint(plan)` hashes the spec (with the data file's sha256 in place of its path, so a copy of
the file elsewhere or on a teammate's machine matches) and the materialized request list
(every message, length, prefix id, hash id and scheduled offset), so the same spec and data give the
same fingerprint and one changed byte of a data file gives another, even where it does not change
a prompt. `ignore` drops spec fields (dotted paths such as 'arrival.rate') for comparing runs of a
sweep over that field: the request list then stays out (it depends on the swept value), except
that an arrival-only sweep keeps the prompts and drops only the schedule.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from typing import Any

from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.materialize import Schedule
from tuning.measure.traffic.request import PlannedRequest
from tuning.measure.traffic.spec import WorkloadSpec

_LEN = 16  # hex characters kept, as the lab's other fingerprints


def _canonical(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def spec_digest(
    spec: WorkloadSpec, data_digest: str | None = None, ignore: Iterable[str] = ()
) -> str:
    """sha256 (16 hex) of the spec without the `ignore`d fields, plus the data file's digest."""
    shape = spec.to_dict()
    shape.pop("name", None)  # a label, not traffic
    shape["source"].pop("path", None)  # where the file lies is not traffic; its bytes are
    for dotted in ignore:
        node: Any = shape
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            raise TrafficError(f"cannot ignore unknown workload field {dotted!r}")
        node.pop(leaf)
    shape["data_digest"] = data_digest
    return hashlib.sha256(_canonical(shape)).hexdigest()[:_LEN]


def requests_digest(requests: Sequence[PlannedRequest], schedule: bool = True) -> str:
    """sha256 (16 hex) over every request's content and shape; `schedule` adds dispatch offsets."""
    h = hashlib.sha256()
    for r in requests:
        row: list[Any] = [
            r.conversation,
            r.turn,
            r.input_len,
            r.output_len,
            r.prefix_id,
            list(r.hash_ids),
            r.think_time_s,
            [[m.role, m.content, m.tokens, m.answer_turn] for m in r.messages],
        ]
        if schedule:
            row.append(r.offset_s)
        blob = _canonical(row)
        h.update(len(blob).to_bytes(8, "little"))
        h.update(blob)
    return h.hexdigest()[:_LEN]


def fingerprint(plan: Schedule, ignore: Iterable[str] = ()) -> str:
    """16 hex chars naming the workload a run replayed (see the module docstring for `ignore`)."""
    ignored = list(ignore)
    parts = [spec_digest(plan.spec, plan.data_digest, ignored)]
    if not ignored:
        parts.append(requests_digest(plan.requests))
    elif all(name.startswith("arrival.") for name in ignored):
        parts.append(requests_digest(plan.requests, schedule=False))
    return hashlib.sha256(":".join(parts).encode()).hexdigest()[:_LEN]
