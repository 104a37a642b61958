"""Issue 22, Trust: runs join an experiment only from the lab that made it. An imported experiment
belongs to its origin lab: a third lab's bundle cannot add runs to it (it once put 504,678 tok/s
into Compare), its maker's later bundle can. Issue 41 case 6: an experiment made in this lab takes
no runs from any bundle, whatever lab uid its manifest names (the uid is printed in every manifest
the lab publishes: a forger copied it and put 252,453 tok/s into Compare); round trips still
work, since runs already here are never added twice."""

from __future__ import annotations

import json
import shutil
import sqlite3
import uuid
import zipfile
from pathlib import Path

import pytest

from store import connect, queries
from store.bundle import BundleError, export_bundle, import_bundle
from store.bundle.format import DATA_NAME, MANIFEST_NAME
from tests.checks import db_fingerprint
from tests.factories import seed_clean_lab

FORGED_TOK_S = 504_678.0
FORGED_LAB_UID_TOK_S = 252_453.0


def _more_runs(db_path: Path, exp_uid: str, throughput: float) -> None:
    """Copies of the experiment's runs under fresh uids, claiming `throughput` (what a lab that
    holds the experiment could put in a bundle)."""
    conn = sqlite3.connect(db_path)
    try:
        cols = [r[1] for r in conn.execute("PRAGMA table_info(runs)") if r[1] not in ("id", "uid")]
        names = ", ".join(f'"{c}"' for c in cols)
        (exp_id,) = conn.execute("SELECT id FROM experiments WHERE uid = ?", [exp_uid]).fetchone()
        for (run_id,) in conn.execute(
            "SELECT id FROM runs WHERE experiment_id = ?", [exp_id]
        ).fetchall():
            conn.execute(
                f"INSERT INTO runs (uid, {names}) SELECT ?, {names} FROM runs WHERE id = ?",
                [uuid.uuid4().hex, run_id],
            )
        conn.execute(
            "UPDATE runs SET output_throughput = ?, summary_json = json_set(summary_json, "
            "'$.output_throughput', ?) WHERE experiment_id = ? AND origin = 'local'",
            [throughput, throughput, exp_id],
        )
        conn.commit()
    finally:
        conn.close()


def _exp_uid(db_path: Path, exp_id: int) -> str:
    with connect(db_path, readonly=True) as db:
        return str(queries.get_experiment(db, exp_id)["uid"])


def _settled(db_path: Path) -> dict[str, str]:
    """The DB's fingerprint once a writer has closed it (a reader leaves an empty -wal behind)."""
    with connect(db_path):
        pass
    return db_fingerprint(db_path)


def _throughputs(db_path: Path) -> list[float]:
    with connect(db_path, readonly=True) as db:
        return sorted(r["summary"]["output_throughput"] for r in queries.list_runs(db))


@pytest.fixture
def three_labs(tmp_path: Path) -> dict[str, object]:
    """Lab B made an experiment and shared it; lab A (this lab) and lab C both imported it."""
    lab_a, lab_b, lab_c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    seed_clean_lab(lab_a, "ada", "box-a", values=(8,), repeats=1, seed=3, name="ada's own")
    made = seed_clean_lab(lab_b, "bo", "box-b", values=(2, 16), repeats=1, seed=5)
    seed_clean_lab(lab_c, "cy", "box-c", values=(4,), repeats=1, seed=7, name="cy's own")
    shared = tmp_path / "bo.bundle.zip"
    export_bundle(lab_b, shared, experiment_ids=[made["experiment_id"]], author="bo", host="b")
    import_bundle(lab_a, shared)
    import_bundle(lab_c, shared)
    return {"a": lab_a, "b": lab_b, "c": lab_c, "exp": made["experiment_id"], "tmp": tmp_path}


def test_a_third_lab_cannot_add_runs_to_an_imported_experiment(
    three_labs: dict[str, object],
) -> None:
    lab_a, lab_c, tmp = Path(str(three_labs["a"])), Path(str(three_labs["c"])), three_labs["tmp"]
    exp_uid = _exp_uid(Path(str(three_labs["b"])), int(str(three_labs["exp"])))
    _more_runs(lab_c, exp_uid, FORGED_TOK_S)  # C "adds runs" to B's experiment it holds
    with connect(lab_c, readonly=True) as db:
        in_c = next(e["id"] for e in queries.list_experiments(db) if e["uid"] == exp_uid)
    forged = Path(str(tmp)) / "cy.bundle.zip"
    export_bundle(lab_c, forged, experiment_ids=[in_c], author="cy", host="c")
    numbers, before = _throughputs(lab_a), _settled(lab_a)
    with pytest.raises(BundleError) as err:
        import_bundle(lab_a, forged)
    message = str(err.value)
    assert err.value.kind == "ownership" and "\n" not in message
    assert "came from another lab" in message and "only from the lab that made it" in message
    assert "cy@c" in message and "experiment 2" in message  # the bundle and the experiment
    assert db_fingerprint(lab_a) == before and _throughputs(lab_a) == numbers
    assert FORGED_TOK_S not in numbers


def test_the_lab_that_made_an_experiment_can_add_runs_to_it_later(
    three_labs: dict[str, object],
) -> None:
    lab_a, lab_b = Path(str(three_labs["a"])), Path(str(three_labs["b"]))
    exp_id = int(str(three_labs["exp"]))
    _more_runs(lab_b, _exp_uid(lab_b, exp_id), 321.0)
    later = Path(str(three_labs["tmp"])) / "bo-later.bundle.zip"
    export_bundle(lab_b, later, experiment_ids=[exp_id], author="bo", host="b")
    result = import_bundle(lab_a, later)
    assert len(result.runs_added) == 2 and result.runs_known == 2
    assert _throughputs(lab_a).count(321.0) == 2


def test_this_lab_s_experiment_takes_runs_from_no_bundle(tmp_path: Path) -> None:
    """A lab that holds a copy of the experiment under its uid may not add runs to it; nor may a
    copy of this lab (a backup, a second checkout): its bundle names this lab's uid, as a
    forger's can, and the two cannot be told apart."""
    lab = tmp_path / "lab.db"
    info = seed_clean_lab(lab, values=(2,), repeats=1)
    exp_uid = _exp_uid(lab, info["experiment_id"])
    shared = tmp_path / "mine.bundle.zip"
    export_bundle(lab, shared, experiment_ids=[info["experiment_id"]], author="ada", host="a")
    other = tmp_path / "other.db"
    seed_clean_lab(other, "mo", "box-m", values=(4,), repeats=1, seed=9)
    import_bundle(other, shared)
    with connect(other, readonly=True) as db:
        in_other = next(e["id"] for e in queries.list_experiments(db) if e["uid"] == exp_uid)
    _more_runs(other, exp_uid, FORGED_TOK_S)
    forged = tmp_path / "mo.bundle.zip"
    export_bundle(other, forged, experiment_ids=[in_other], author="mo", host="m")
    before = _settled(lab)
    with pytest.raises(BundleError, match="which was made in this lab") as err:
        import_bundle(lab, forged)
    assert err.value.kind == "ownership" and db_fingerprint(lab) == before

    backup = tmp_path / "backup.db"
    shutil.copy(lab, backup)
    _more_runs(backup, exp_uid, 99.0)
    mine = tmp_path / "from-backup.bundle.zip"
    export_bundle(backup, mine, experiment_ids=[info["experiment_id"]], author="ada", host="a")
    with pytest.raises(BundleError, match="which was made in this lab") as err:
        import_bundle(lab, mine)
    assert err.value.kind == "ownership" and db_fingerprint(lab) == before


def _name_lab(bundle: Path, lab_uid: str) -> None:
    """Rewrite the bundle's manifest to claim `lab_uid` (its data, and so its checksum, as is)."""
    with zipfile.ZipFile(bundle) as zf:
        manifest = json.loads(zf.read(MANIFEST_NAME))
        data = zf.read(DATA_NAME)
    manifest["lab_uid"] = lab_uid
    with zipfile.ZipFile(bundle, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(MANIFEST_NAME, json.dumps(manifest))
        zf.writestr(DATA_NAME, data)


def test_a_bundle_that_copies_this_lab_s_uid_adds_no_run_to_its_experiments(
    tmp_path: Path,
) -> None:
    """Issue 41 case 6: the forger holds our experiment (from our published bundle), adds runs
    claiming 252,453 tok/s, and names our lab in his manifest. Refused, our numbers unchanged."""
    lab = tmp_path / "lab.db"
    info = seed_clean_lab(lab, values=(2, 16), repeats=1)
    exp_uid = _exp_uid(lab, info["experiment_id"])
    shared = tmp_path / "ours.bundle.zip"
    ours = export_bundle(lab, shared, experiment_ids=[info["experiment_id"]], author="a", host="a")
    assert ours.lab_uid  # printed in every manifest the lab publishes
    forger = tmp_path / "forger.db"
    seed_clean_lab(forger, "mallory", "box-m", values=(4,), repeats=1, seed=9)
    import_bundle(forger, shared)
    with connect(forger, readonly=True) as db:
        in_forger = next(e["id"] for e in queries.list_experiments(db) if e["uid"] == exp_uid)
    _more_runs(forger, exp_uid, FORGED_LAB_UID_TOK_S)
    forged = tmp_path / "forged.bundle.zip"
    export_bundle(forger, forged, experiment_ids=[in_forger], author="ada", host="a")
    _name_lab(forged, ours.lab_uid)
    numbers, before = _throughputs(lab), _settled(lab)
    with pytest.raises(BundleError, match="which was made in this lab") as err:
        import_bundle(lab, forged)
    assert err.value.kind == "ownership" and "a lab uid is a name, not a proof" in str(err.value)
    assert db_fingerprint(lab) == before and _throughputs(lab) == numbers
    assert FORGED_LAB_UID_TOK_S not in numbers


def test_a_round_trip_back_to_the_lab_that_made_it_adds_only_what_is_new(tmp_path: Path) -> None:
    """Export from A, import into B, B publishes A's experiment beside its own, A imports it: A's
    runs are already here (nothing added to A's experiment, nothing refused), B's come in."""
    lab_a, lab_b = tmp_path / "a.db", tmp_path / "b.db"
    made = seed_clean_lab(lab_a, values=(2, 16), repeats=1)
    own_b = seed_clean_lab(lab_b, "bo", "box-b", values=(4,), repeats=1, seed=5, name="bo's")
    there = tmp_path / "a.bundle.zip"
    export_bundle(lab_a, there, experiment_ids=[made["experiment_id"]], author="a", host="a")
    import_bundle(lab_b, there)
    exp_uid = _exp_uid(lab_a, made["experiment_id"])
    with connect(lab_b, readonly=True) as db:
        in_b = next(e["id"] for e in queries.list_experiments(db) if e["uid"] == exp_uid)
    back = tmp_path / "b.bundle.zip"
    export_bundle(lab_b, back, experiment_ids=[in_b, own_b["experiment_id"]], author="bo", host="b")
    result = import_bundle(lab_a, back)
    assert result.runs_known == 2 and result.experiments_known == 1
    assert len(result.runs_added) == 1 and len(result.experiments_added) == 1
    with connect(lab_a, readonly=True) as db:
        runs = queries.list_runs(db, made["experiment_id"], include_hidden=True)
    assert sorted(r["id"] for r in runs) == sorted(made["run_ids"])
