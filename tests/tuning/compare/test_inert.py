"""Issue 25 item 4: the inert knobs of a workload, from the experiments stored in the lab (built
here, no engine): a flag whose values were all equivalent is listed for that workload only; one
that changed a metric, or was judged on single runs only, is not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store import connect
from tests.factories import add_measured_experiment
from tuning.cli.main import main
from tuning.compare.inert import inert_knobs, knobs

FLAT = {"output_throughput": [1000.0, 1003.0, 998.0], "mean_ttft_ms": [100.0, 100.4, 99.7]}
SAME = {"output_throughput": [1001.0, 999.0, 1002.0], "mean_ttft_ms": [100.0, 100.2, 99.9]}
FAST = {"output_throughput": [1200.0, 1210.0, 1195.0], "mean_ttft_ms": [100.0, 100.2, 99.9]}


def seed(db: Path) -> dict[str, int]:
    return {
        "pc": add_measured_experiment(db, "enable-prefix-caching", {True: FLAT, False: SAME}),
        "bs": add_measured_experiment(db, "block-size", {16: FLAT, 32: SAME}),
        "seqs": add_measured_experiment(db, "max-num-seqs", {4: FLAT, 16: FAST}),
        # the same flag on another workload changed throughput there: inert only on fp-a
        "bs_b": add_measured_experiment(db, "block-size", {16: FLAT, 32: FAST}, "fp-b"),
        # single runs decide nothing: neither inert nor not
        "cp": add_measured_experiment(
            db,
            "enable-chunked-prefill",
            {
                True: {"output_throughput": [1000.0], "mean_ttft_ms": [100.0]},
                False: {"output_throughput": [1001.0], "mean_ttft_ms": [100.1]},
            },
        ),
    }


def test_the_inert_list_is_built_from_stored_experiments(fresh_db: Path) -> None:
    ids = seed(fresh_db)
    with connect(fresh_db, readonly=True) as db:
        inert = inert_knobs(db)
        judged = {(k.param, k.fingerprint): k for k in knobs(db)}
        only_b = inert_knobs(db, "fp-b")
    print([(k.param, k.fingerprint, k.values, k.reference, k.equivalent) for k in inert])
    assert [(k.param, k.fingerprint) for k in inert] == [
        ("enable-prefix-caching", "fp-a"),
        ("block-size", "fp-a"),
    ]
    pc, bs = inert
    assert pc.values == ["true", "false"] and pc.reference == "vLLM default true"
    assert pc.equivalent == [ids["pc"]] and bs.reference == "first value 16"
    assert judged[("max-num-seqs", "fp-a")].differed == [ids["seqs"]]
    assert judged[("block-size", "fp-b")].differed == [ids["bs_b"]]
    chunked = judged[("enable-chunked-prefill", "fp-a")]
    assert not chunked.inert and not chunked.equivalent and not chunked.differed
    assert only_b == []


def test_the_inert_command_lists_them(fresh_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ids = seed(fresh_db)
    assert main(["inert", "--db", str(fresh_db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Inert knobs (every value within ±2 % on output throughput,")
    assert (
        "  enable-prefix-caching on workload fp-a (24 requests, concurrency 8, 64 in / 16 out): "
        f"values true, false vs vLLM default true; experiments {ids['pc']}"
    ) in out
    assert "max-num-seqs" not in out and "fp-b" not in out
    assert main(["inert", "--db", str(fresh_db), "--json", "--fingerprint", "fp-b"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(k["param"], k["inert"]) for k in data["knobs"]] == [("block-size", False)]
    print(out)
