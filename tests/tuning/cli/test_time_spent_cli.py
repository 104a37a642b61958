"""Issue 38, items 1, 5 and 7 from the command line: `runs --json` carries each run's anatomy;
`compare` prints where each experiment's time went ("took 2.2 min: 1.3 starting, ..."), the
estimate made before it started against what it took, and which starts were cold (their time to
healthy counted in the verdict, said); `--json` carries the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from store import connect, queries, repo
from tests.factories import seed_lab
from tuning.cli.main import main as cli_main
from tuning.experiment.run_anatomy import RunClock


def _anatomy(start_s: float, load_s: float) -> dict[str, Any]:
    clock = RunClock(0.0, "between")
    clock.mark("start", at=1.0)
    clock.mark("load", at=1.0 + start_s)
    clock.mark("storing", at=1.0 + start_s + load_s)
    return clock.close(at=2.0 + start_s + load_s)


@pytest.fixture
def spent_lab(tmp_path: Path) -> dict[str, Any]:
    """A finished experiment whose runs have anatomies, the first start of each value cold."""
    path = tmp_path / "lab.db"
    ids = seed_lab(path, values=(2, 16), repeats=2, with_failed=False, with_secrets=False)
    with connect(path) as db:
        runs = queries.list_runs(db, ids["experiment_id"], include_hidden=True)
        seen: set[str] = set()
        for run in runs:
            cold = run["value"] not in seen
            seen.add(str(run["value"]))
            healthy = 80.0 if cold else 50.0
            state = "miss" if cold else "hit"
            startup = {"anatomy": {"compile_cache": {"state": state}, "phases": []}}
            repo.update_run(
                db,
                int(run["id"]),
                anatomy_json=_anatomy(healthy, 30.0),
                time_to_healthy_s=healthy,
                startup_json=startup,
            )
        repo.update_experiment(
            db,
            ids["experiment_id"],
            anatomy_json={"after_runs_s": 4.0},
            estimate_json={"runs": 4, "seconds": 900.0, "costs": {"basis": "a guess"}},
        )
    return {"path": path, "exp": ids["experiment_id"], "runs": [int(r["id"]) for r in runs]}


def test_compare_prints_where_the_time_went_its_estimate_and_its_cold_starts(
    spent_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    db, exp = str(spent_lab["path"]), str(spent_lab["exp"])
    assert cli_main(["compare", "--db", db, "--experiment", exp]) == 0
    out = capsys.readouterr().out
    # 4 runs: 80 + 80 + 50 + 50 s starting, 4 x 30 s load, 4 x 1 s between and 4 x 1 s storing,
    # and the last stop's 4 s: 392 s
    assert f"experiment {exp}, took 6.5 min: 4.3 starting, 2.0 load, 0.1 other, 0.1 storing" in out
    assert "estimate before start: 4 runs, about 15 min (a guess); took 6.5 min over 4 runs" in out
    assert "0.44x the estimate" in out
    first, second = spent_lab["runs"][:2]
    assert f"runs {first}, {second} started with a cold compile cache" in out
    assert "80.0 s cold vs 50.0 s warm" in out
    assert cli_main(["compare", "--db", db, "--experiment", exp, "--json"]) == 0
    spent = json.loads(capsys.readouterr().out)["time_spent"]
    assert [e["experiment_id"] for e in spent] == [spent_lab["exp"]]
    assert spent[0]["cold_starts"] == [first, second] and spent[0]["took_s"] == pytest.approx(392)


def test_runs_json_carries_each_runs_anatomy(
    spent_lab: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(["runs", "--db", str(spent_lab["path"]), "--json"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    anat = rows[spent_lab["runs"][0]]["anatomy"]
    assert [p["key"] for p in anat["parts"]] == ["between", "start", "load", "storing"]
    assert anat["wall_s"] == 112.0 and anat["parts_sum_s"] == 112.0
