"""Issue 25 item 4: `plan` skips a knob the lab found inert on the same workload, and says so;
`--include-inert` keeps it; a plan with nothing left to search is refused in one line. The
stored experiments are built here; the plan itself is stubbed (no engine starts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.factories import add_measured_experiment
from tests.fakes.engines import fake_settings_env
from tuning.cli.main import build_parser, main
from tuning.cli.search import search_options

FLAT = {"output_throughput": [1000.0, 1003.0, 998.0], "mean_ttft_ms": [100.0, 100.4, 99.7]}
SAME = {"output_throughput": [1001.0, 999.0, 1002.0], "mean_ttft_ms": [100.0, 100.2, 99.9]}
# On the fake vLLM's settings (`lab` below): block-size needs a server the lab starts (an
# attached --base-url is refused for it before any work, issue 41).
PLAN = ["plan", "--json", "--param-range", "block-size=16:32", "--num-requests", "24"]
PLAN += ["--concurrency", "8"]


def plan_args(db: Path, params: str, *more: str) -> list[str]:
    return [*PLAN, "--params", params, "--db", str(db), *more]


@pytest.fixture
def planned(fresh_db: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The parameters each plan would have searched (run_plan stubbed: nothing starts), with the
    fake vLLM as the lab's engine."""
    for key, value in fake_settings_env(fresh_db.parent).items():
        monkeypatch.setenv(key, value)
    calls: list[list[str]] = []

    def fake_run_plan(db_path: Path, spec: Any, *_: Any, **__: Any) -> dict[str, Any]:
        calls.append(list(spec.params))
        return {"params": list(spec.params)}

    monkeypatch.setattr("tuning.decide.search.plan.run_plan", fake_run_plan)
    return calls


def seed_inert_block_size(db: Path) -> int:
    """block-size 16 vs 32: equivalent on the plan's own workload (its fingerprint)."""
    args = build_parser().parse_args(plan_args(db, "block-size"))
    fingerprint = search_options(args)["workload"].fingerprint()
    return add_measured_experiment(db, "block-size", {16: FLAT, 32: SAME}, fingerprint)


def test_plan_skips_an_inert_knob_and_says_so(
    fresh_db: Path, planned: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    exp = seed_inert_block_size(fresh_db)
    args = plan_args(fresh_db, "block-size,max-num-seqs", "--param-range", "max-num-seqs=1:8")
    assert main(args) == 0
    out = capsys.readouterr()
    assert planned == [["max-num-seqs"]]
    assert out.err.startswith(
        f"skipping, inert on this workload: block-size (experiment {exp}: values 16, 32 all "
        "equivalent)"
    )
    result = json.loads(out.out)
    assert [k["param"] for k in result["skipped_inert"]] == ["block-size"]

    assert main([*args, "--include-inert"]) == 0
    assert planned[-1] == ["block-size", "max-num-seqs"]
    assert "skipping" not in capsys.readouterr().err
    print(out.err)


def test_a_plan_of_inert_knobs_only_is_refused(
    fresh_db: Path, planned: list[list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    seed_inert_block_size(fresh_db)
    assert main(plan_args(fresh_db, "block-size")) == 1
    err = capsys.readouterr().err
    assert err.startswith("refused: every parameter of --params is inert on this workload")
    assert err.count("\n") == 1 and planned == []
