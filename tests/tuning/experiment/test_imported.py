"""Issue 11, item 7: an imported experiment is read-only and its stored engine command never runs
(a bundle's `engine_json.command` may be `/bin/sh -c ...`); `run-experiment --use-local-engine`
plans the same sweep as a new local experiment on this lab's engine."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest

from store import connect, queries
from store.bundle import export_bundle, import_bundle
from tests.factories import seed_clean_lab
from tuning.cli.main import main
from tuning.engine.current import current_spec
from tuning.experiment.plan import ImportedExperimentError
from tuning.experiment.runner import run_experiment


@pytest.fixture
def imported(tmp_path: Path, lab_home: Path) -> dict[str, Any]:
    """A teammate's sweep whose engine command would touch a marker file, imported here."""
    marker = tmp_path / "pwned"
    src = tmp_path / "mallory.db"
    info = seed_clean_lab(src, "mallory", "box-m", values=(2,), repeats=1)
    conn = sqlite3.connect(src)
    conn.execute(
        "UPDATE experiments SET engine_json = json_set(engine_json, '$.command', json(?))",
        [f'["/bin/sh", "-c", "touch {marker}"]'],
    )
    conn.commit()
    conn.close()
    bundle = tmp_path / "m.bundle.zip"
    export_bundle(src, bundle, experiment_ids=[info["experiment_id"]], author="m", host="m")
    lab = tmp_path / "lab.db"
    result = import_bundle(lab, bundle)
    return {"lab": lab, "exp": result.experiments_added[0], "marker": marker}


def test_the_runner_refuses_an_imported_experiment(imported: dict[str, Any]) -> None:
    with pytest.raises(ImportedExperimentError, match="--use-local-engine"):
        run_experiment(imported["lab"], imported["exp"])
    assert not imported["marker"].exists()
    with connect(imported["lab"], readonly=True) as db:
        assert queries.get_experiment(db, imported["exp"])["status"] == "done"
        assert len(queries.experiment_run_ids(db, imported["exp"])) == 1


def test_run_experiment_cli_refuses_it_plainly(
    imported: dict[str, Any], lab_home: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    out = tuning_cli(
        ["run-experiment", "--db", str(imported["lab"]), "--experiment", str(imported["exp"])],
        lab_home,
        timeout=120,
    )
    assert out.returncode == 1 and "read-only" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not imported["marker"].exists()


def test_use_local_engine_plans_a_new_local_experiment(
    imported: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[int] = []
    monkeypatch.setattr(  # the run itself is not this test's business: record what would run
        "tuning.cli.experiment._run_stored",
        lambda path, exp_id, *a, **kw: (started.append(exp_id), (0, []))[1],
    )
    lab, old = imported["lab"], imported["exp"]
    argv = ["run-experiment", "--db", str(lab), "--experiment", str(old), "--use-local-engine"]
    assert main(argv) == 0
    assert len(started) == 1 and started[0] != old
    with connect(lab, readonly=True) as db:
        new, orig = queries.get_experiment(db, started[0]), queries.get_experiment(db, old)
    assert new["origin"] == "local" and new["engine"] == current_spec().to_json()
    assert "/bin/sh" not in str(new["engine"])
    for key in ("param", "values", "workload", "repeats"):
        assert new[key] == orig[key], key
    assert orig["config"].items() <= new["config"].items()  # on the local engine's baseline
