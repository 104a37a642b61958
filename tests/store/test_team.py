"""The team folder: publish writes a sanitized, generated file name; listing shows who, where,
when and what is already here; "import new" brings in only what is new, refuses a bad bundle on
its own, and teammates' runs keep their author and are checked for comparability."""

from __future__ import annotations

import json
import zipfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from store import open_db, queries
from store.bundle import SUFFIX, export_bundle
from store.team import TeamError, bundle_file_name, import_new, list_team, publish, team_folder_path
from tests.checks import db_fingerprint, table_rows
from tuning.compare.comparison import build_comparison


def test_file_names_are_generated_and_sanitized() -> None:
    when = datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert (
        bundle_file_name("ada", "gpu-box-3", when, "1a2b3c4d5e6f")
        == f"ada-gpu_box_3-20250304T050607Z-1a2b3c4d{SUFFIX}"
    )
    name = bundle_file_name("../../etc/passwd", "h/o\\st\x00 x", when, "ffffffff00")
    assert "/" not in name and "\\" not in name and "\x00" not in name and ".." not in name
    assert name.startswith("etc_passwd-h_o_st_x-")
    assert not bundle_file_name("...", "", when, "abc").startswith(".")
    assert bundle_file_name("", "", when, "abcdef12").startswith("unknown-host-")
    assert len(bundle_file_name("a" * 500, "b" * 500, when, "c" * 64)) < 120


def test_publish_list_import_new(team: dict[str, Any]) -> None:
    folder = team["folder"]
    bob_file = team["publish_bob"]()
    ada_file = publish(
        team["ada"], folder, run_ids=team["ada_info"]["run_ids"][:2], author="ada", host="box-a"
    )
    assert bob_file.parent == folder and bob_file.name.startswith("bob-box_b-")
    assert bob_file.name.endswith(SUFFIX) and ada_file.name.startswith("ada-box_a-")
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no partial files left
    listing = {b.name: b for b in list_team(folder, team["ada"])}
    assert listing[ada_file.name].state == "imported"  # ada's own runs are already here
    bob_entry = listing[bob_file.name]
    assert bob_entry.state == "new" and bob_entry.manifest is not None
    assert (bob_entry.manifest.author, bob_entry.manifest.host) == ("bob", "box-b")
    assert bob_entry.manifest.counts["runs"] == 4 and bob_entry.manifest.created_at
    summary = import_new(team["ada"], folder)
    assert [i.bundle.name for i in summary.imports] == [bob_file.name]
    assert summary.runs_added == 4 and not summary.refused
    assert {b.name: b.state for b in list_team(folder, team["ada"])} == {
        bob_file.name: "imported",
        ada_file.name: "imported",
    }
    before = db_fingerprint(team["ada"])
    again = import_new(team["ada"], folder)
    assert again.imports == [] and db_fingerprint(team["ada"]) == before
    runs = table_rows(team["ada"], "runs")
    bobs = [r for r in runs if r["author"] == "bob"]
    assert len(bobs) == 4 and all(r["host"] == "box-b" for r in bobs)
    assert all(r["origin"].endswith("from bob@box-b") for r in bobs)


def test_teammates_runs_compare_with_yours_and_hardware_is_flagged(team: dict[str, Any]) -> None:
    team["publish_bob"]()
    import_new(team["ada"], team["folder"])
    db = open_db(team["ada"], readonly=True)
    bob_ids = [int(r["id"]) for r in table_rows(team["ada"], "runs") if r["author"] == "bob"]
    mine = team["ada_info"]["run_ids"]
    runs = queries.load_runs(db, [mine[0], mine[3], *bob_ids])
    cmp = build_comparison(runs, [mine[0], mine[3]])
    flagged = {c.run_id: c.reason for c in cmp.excluded}
    assert set(bob_ids) <= set(flagged)
    assert all("different hardware: cpu-2core vs gpu-h100" in flagged[i] for i in bob_ids)
    assert {r["author"] for r in runs} == {"ada", "bob"}
    db.conn.close()


def test_a_bad_bundle_in_the_folder_is_refused_alone(team: dict[str, Any]) -> None:
    folder = team["folder"]
    good = team["publish_bob"]()
    broken = folder / f"mallory-evil-20250101T000000Z-deadbeef{SUFFIX}"
    broken.write_bytes(good.read_bytes()[:-200])
    tampered = folder / f"mallory-evil-20250101T000001Z-cafebabe{SUFFIX}"
    export_bundle(
        team["bob"],
        tampered,
        run_ids=[team["bob_info"]["run_ids"][0]],
        author="mallory",
        host="evil",
    )
    with zipfile.ZipFile(tampered) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    manifest = json.loads(members["manifest.json"])
    manifest["files"]["bundle.sqlite"]["sha256"] = "0" * 64
    with zipfile.ZipFile(tampered, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("bundle.sqlite", members["bundle.sqlite"])
    (folder / "notes.txt").write_text("not a bundle, not listed")
    listing = {b.name: b for b in list_team(folder, team["ada"])}
    assert "notes.txt" not in listing
    assert listing[broken.name].state == "invalid" and "truncated" in listing[broken.name].error
    assert listing[tampered.name].state == "new"  # its manifest reads fine; import will check
    summary = import_new(team["ada"], folder)
    refused = {i.bundle.name: i for i in summary.refused}
    assert set(refused) == {tampered.name} and refused[tampered.name].kind == "checksum"
    assert summary.runs_added == 4
    assert not [r for r in table_rows(team["ada"], "runs") if r["author"] == "mallory"]


def test_team_folder_must_exist(tmp_path: Path) -> None:
    with pytest.raises(TeamError, match="no team folder set"):
        team_folder_path("")
    with pytest.raises(TeamError, match="does not exist"):
        team_folder_path(tmp_path / "not-mounted")
    with pytest.raises(TeamError):
        publish(tmp_path / "x.db", tmp_path / "nope", run_ids=[1], author="a", host="b")
