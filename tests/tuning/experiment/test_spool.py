"""Issue 41 case 12: on a full disk a run's 200 measured requests were lost: the storing phase
failed and the records in the runner's memory went with it. Now they are kept in a spool file
before the storing phase writes anything; the run fails (store_error) as before, and the next
`runs` (or runner start) stores them on their run and says so.

The full disk is SQLite's own SQLITE_FULL ("database or disk is full"): the runner's connection
may not grow the DB (`PRAGMA max_page_count`) while it inserts the request rows, then the space
comes back, as when the user frees some."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import pytest
from sqlite_utils import Database

from core.records import RequestRecord
from store import open_db, queries, repo
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

Cli = Callable[..., CompletedProcess[str]]
REQUESTS = 200


def _disk_full_once(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first insert of request rows meets SQLITE_FULL; the errors SQLite raised."""
    real = repo.insert_requests
    seen: list[str] = []

    def insert(db: Database, run_id: int, records: Iterable[RequestRecord]) -> int:
        if seen:
            return real(db, run_id, records)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        try:
            return real(db, run_id, records)
        except sqlite3.OperationalError as exc:
            seen.append(str(exc))
            raise
        finally:
            db.execute("PRAGMA max_page_count = 1073741823")  # the space is back

    monkeypatch.setattr(repo, "insert_requests", insert)
    return seen


def _run_on_a_full_disk(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen = _disk_full_once(monkeypatch)
    wl = Workload(num_requests=REQUESTS, concurrency=8, input_len=8, output_len=8, num_warmups=1)
    with FakeOpenAIServer(FakeConfig(model="m")) as srv:
        exp_id = plan_experiment(
            db_path,
            ExperimentSpec.build(
                param="concurrency",
                values=[8],
                workload=wl,
                engine=None,
                base_url=srv.base_url,
                model="m",
            ),
        )
        run_experiment(db_path, exp_id)
    assert seen == ["database or disk is full"], seen
    (run,) = queries.list_runs(open_db(db_path), exp_id, include_hidden=True)
    return run


def test_requests_that_met_a_full_disk_are_stored_by_the_next_runs(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch, tuning_cli: Cli
) -> None:
    db_path = lab_home / "lab.db"
    run = _run_on_a_full_disk(db_path, monkeypatch)
    assert run["status"] == "failed" and run["failure_kind"] == "store_error", run
    db = open_db(db_path)
    assert queries.get_requests(db, run["id"]) == []  # the write failed: nothing stored
    (kept,) = (lab_home / "spool").glob("run-*.json")  # ... but the records are kept
    assert kept.read_text().count('"index":') == REQUESTS

    out = tuning_cli(["runs", "--json"], lab_home, env={"TUNING_LAB_DB": str(db_path)})
    assert out.returncode == 0, out.stderr
    assert f"run {run['id']}: its {REQUESTS} measured requests" in out.stderr, out.stderr
    assert "are stored now" in out.stderr
    stored = queries.get_requests(open_db(db_path), run["id"])
    assert len(stored) == REQUESTS and all(r.ok for r in stored)
    after = queries.get_run(open_db(db_path), run["id"])
    assert after["completed"] == REQUESTS and after["output_throughput"] > 0
    assert "stored later from the spool file" in after["failure_reason"]
    assert not kept.exists()  # stored once: the file is gone
    again = tuning_cli(["runs", "--json"], lab_home, env={"TUNING_LAB_DB": str(db_path)})
    assert "stored now" not in again.stderr


def test_a_run_that_stored_everything_leaves_no_spool_file(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=8, concurrency=2, input_len=8, output_len=8, num_warmups=1)
    with FakeOpenAIServer(FakeConfig(model="m")) as srv:
        exp_id = plan_experiment(
            db_path,
            ExperimentSpec.build(
                param="concurrency",
                values=[2],
                workload=wl,
                engine=None,
                base_url=srv.base_url,
                model="m",
            ),
        )
        run_experiment(db_path, exp_id)
    (run,) = queries.list_runs(open_db(db_path), exp_id)
    assert run["status"] == "done" and not list((lab_home / "spool").glob("*"))
