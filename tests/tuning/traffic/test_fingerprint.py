"""Fingerprints: same spec and data, same fingerprint; one changed byte of a data file, another."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tuning.measure.traffic.errors import TrafficError
from tuning.measure.traffic.fingerprint import fingerprint, requests_digest, spec_digest
from tuning.measure.traffic.materialize import Schedule, materialize
from tuning.measure.traffic.spec import Arrival, LengthDist, Source, WorkloadSpec
from tuning.measure.traffic.workload import LocalTokenizer

WORKLOADS = Path(__file__).resolve().parents[3] / "workloads"


def trace_spec(path: Path) -> WorkloadSpec:
    return WorkloadSpec(source=Source("trace", str(path)), input=None, output=None, num_requests=20)


def test_same_spec_and_data_same_fingerprint(tok: LocalTokenizer) -> None:
    spec = WorkloadSpec(num_requests=10, input=LengthDist(mean=40), output=LengthDist(mean=8))
    a, b = materialize(spec, tok), materialize(spec, tok)
    assert fingerprint(a) == fingerprint(b) and len(fingerprint(a)) == 16
    renamed = materialize(replace(spec, name="another label"), tok)
    assert fingerprint(renamed) == fingerprint(a)
    other = materialize(replace(spec, seed=1), tok)
    assert fingerprint(other) != fingerprint(a)


def test_one_changed_byte_of_a_data_file_changes_it(tok: LocalTokenizer, tmp_path: Path) -> None:
    original = (WORKLOADS / "mooncake-small.jsonl").read_bytes()
    path = tmp_path / "trace.jsonl"
    path.write_bytes(original)
    before = fingerprint(materialize(trace_spec(path), tok))
    # a byte far past the 20 lines used: the prompts do not change, the fingerprint does
    pos = original.rindex(b'"output_length": ') + len(b'"output_length": ')
    changed = original[:pos] + bytes([original[pos] ^ 1]) + original[pos + 1 :]
    path.write_bytes(changed)
    after_plan = materialize(trace_spec(path), tok)
    assert fingerprint(after_plan) != before
    path.write_bytes(original)
    assert fingerprint(materialize(trace_spec(path), tok)) == before
    copy = tmp_path / "elsewhere" / "copy.jsonl"  # the same bytes at another path
    copy.parent.mkdir()
    copy.write_bytes(original)
    assert fingerprint(materialize(trace_spec(copy), tok)) == before


def test_ignoring_a_swept_field(tok: LocalTokenizer) -> None:
    def plan(rate: float) -> Schedule:
        spec = WorkloadSpec(
            num_requests=5,
            input=LengthDist(mean=30),
            output=LengthDist(mean=5),
            arrival=Arrival("open", rate=rate),
        )
        return materialize(spec, tok)

    slow, fast = plan(1.0), plan(10.0)
    assert fingerprint(slow) != fingerprint(fast)
    assert fingerprint(slow, ["arrival.rate"]) == fingerprint(fast, ["arrival.rate"])
    assert requests_digest(slow.requests, schedule=False) == requests_digest(
        fast.requests,
        schedule=False,
    )
    with pytest.raises(TrafficError, match="unknown workload field 'arrival.speeed'"):
        spec_digest(WorkloadSpec(), ignore=["arrival.speeed"])
