"""Issue 13, acceptance: a start-limit search on the embedded engine (max-model-len against a 2 MiB
KV budget) finds a bracket that holds the true boundary (issue 37 item 4: exploring spends at most
half the budget, the rest races the values that started).

The true boundary, twice: tuning.engine.predict's arithmetic (2 MiB / 2,048 bytes a token = 8
blocks of
128; the engine keeps one back as its null block, so 7 x 128 = 896 is the largest max-model-len
that starts) and the engine's own refusal ("... the estimated maximum model length is 896").
The range 300:1500 puts neither end nor any midpoint on 896, so the test cannot pass by luck."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import open_db, queries
from tuning.engine.predict import ModelShape, predict_config
from tuning.engine.spec import EngineSpec

# five engine starts: about 2-3 min on an idle machine, far more when other jobs share the cores
pytestmark = [pytest.mark.engine, pytest.mark.timeout(1800)]

KV = "2M"
RANGE = (300, 1500)
# exploring gets 3 of the 5 runs: coarse 300 and 1500, then one bisection step (671); the race
# gives 300 and 671 a second start each
BUDGET = 5


def test_max_model_len_search_finds_the_start_limit(
    built_engine: EngineSpec,
    tmp_path: Path,
    tuning_cli: Callable[..., CompletedProcess[str]],
) -> None:
    config = {**built_engine.baseline, "kv-cache-memory-bytes": KV}
    pred = predict_config(config, ModelShape.load(built_engine.model), backend="cpu")
    true_limit = pred.max_model_len_limit
    assert true_limit == 896

    db = tmp_path / "lab.db"
    # a tiny load for the values that start; a loaded 2-core machine can take minutes to fail one
    search = (
        f"search --param max-model-len --range {RANGE[0]}:{RANGE[1]} "
        f"--set kv-cache-memory-bytes={KV} --coarse 2 --budget-runs {BUDGET} --concurrency 1 "
        "--num-requests 2 --input-len 8 --output-len 8 --num-warmups 0 --start-timeout 600"
    )
    out = tuning_cli([*search.split(), "--db", str(db), "--json"], tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads(out.stdout)
    limit = result["start_limit"]
    assert limit is not None, result["log"]
    starts, fails = limit["starts"], limit["fails"]
    print(f"start limit found: [{starts}, {fails}); true {true_limit}; {len(result['runs'])} runs")
    # the bracket holds the truth, so the found value is within one bisection step of it
    assert starts <= true_limit < fails
    assert len(result["runs"]) == BUDGET
    assert any(e["why"].startswith("start limit") for e in result["log"])

    # every value above the limit was refused by the engine, with its own estimate of the limit
    conn = open_db(db)
    runs = [queries.get_run(conn, i) for i in result["runs"]]
    for run in runs:
        value = int(run["value"])
        assert (run["status"] == "done") == (value <= true_limit), run
    refused = [r for r in runs if r["status"] != "done"]
    assert refused and all(r["failure_kind"] == "out_of_memory" for r in refused)
    estimates = {
        int(m.group(1))
        for r in refused
        if (m := re.search(r"estimated maximum model length is (\d+)", r["failure_reason"] or ""))
    }
    assert estimates == {true_limit}, [r["failure_reason"] for r in refused]
