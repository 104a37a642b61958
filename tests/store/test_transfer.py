"""A fleet worker's run rows (run, requests, samples) written onto the driver's run: the run keeps
its id, uid and experiment, takes the measured columns, and its rows replace any it had."""

from __future__ import annotations

from pathlib import Path

from core.records import NewExperiment
from store import connect, repo
from store.transfer import run_rows, store_run_rows


def _run(db, **fields):  # type: ignore[no-untyped-def]
    exp = repo.create_experiment(
        db, NewExperiment(param="max-num-seqs"), values_json=[2], repeats=1
    )
    return exp, repo.create_run(db, experiment_id=exp, seq=0, param="max-num-seqs", **fields)


def test_rows_move_from_a_scratch_db_onto_the_drivers_run(tmp_path: Path) -> None:
    with connect(tmp_path / "worker.db") as w:
        _, wid = _run(w, value="2", status="done", completed=8, config_json={"max-num-seqs": 2})
        w.table("requests").insert_all(
            [{"run_id": wid, "idx": i, "ok": 1, "output_tokens": 4} for i in range(3)]
        )
        w.table("samples").insert_all(
            [{"run_id": wid, "t_s": t / 10, "series": "rss", "value": 1.0} for t in range(5)]
        )
        rows = run_rows(w, wid)
    with connect(tmp_path / "lab.db") as db:
        exp, rid = _run(db, value="2", status="running", author="ada")
        _, other = _run(db, value="4")
        uid = db.table("runs").get(rid)["uid"]
        store_run_rows(db, rid, rows)
        run = db.table("runs").get(rid)
        assert (run["id"], run["uid"], run["experiment_id"], run["author"]) == (
            rid,
            uid,
            exp,
            "ada",
        )
        assert run["status"] == "done" and run["completed"] == 8
        assert db.execute("select count(*) from requests where run_id=?", [rid]).fetchone()[0] == 3
        assert db.execute("select count(*) from samples where run_id=?", [rid]).fetchone()[0] == 5
        store_run_rows(db, rid, rows)  # again: replaced, not doubled
        assert db.execute("select count(*) from samples where run_id=?", [rid]).fetchone()[0] == 5
        assert db.execute("select count(*) from samples where run_id=?", [other]).fetchone()[0] == 0
