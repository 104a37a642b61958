"""The sharing commands: `export` and `import` of bundles, `publish` to and `team` of the team
folder (exit codes, messages, a refused bundle changes nothing)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.checks import db_fingerprint
from tuning.cli.main import main as cli_main


def test_cli_export_and_import(
    source: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "cli.bundle.zip"
    rc = cli_main(
        [
            "export",
            "--db",
            str(source["path"]),
            "--experiment",
            str(source["experiment_id"]),
            str(source["other"]["run_ids"][0]),
            "--out",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    assert "2 experiment(s), 7 run(s)" in capsys.readouterr().out
    fresh = tmp_path / "fresh.db"
    assert cli_main(["import", "--db", str(fresh), str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["runs_added"]) == 7 and data["origin"].startswith("bundle:")
    assert cli_main(["import", "--db", str(fresh), str(out)]) == 0
    assert "0 run(s) and 0 experiment(s) added" in capsys.readouterr().out
    broken = tmp_path / "broken.bundle.zip"
    broken.write_bytes(out.read_bytes()[:100])
    before = db_fingerprint(fresh)
    assert cli_main(["import", "--db", str(fresh), str(broken)]) == 1
    assert "refused:" in capsys.readouterr().err
    assert db_fingerprint(fresh) == before
    assert (
        cli_main(["export", "--db", str(source["path"]), "--out", str(tmp_path / "none.zip")]) == 1
    )


def test_cli_publish_and_team(
    team: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", str(team["folder"]))
    monkeypatch.setenv("TUNING_LAB_AUTHOR", "bob")
    monkeypatch.setenv("TUNING_LAB_HOST_NAME", "box-b")
    assert (
        cli_main(
            [
                "publish",
                "--db",
                str(team["bob"]),
                "--experiment",
                str(team["bob_info"]["experiment_id"]),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("published ") and "bob-box_b-" in out
    assert cli_main(["team", "--db", str(team["ada"]), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["state"] == "new" and entry["author"] == "bob" and entry["counts"]["runs"] == 4
    assert cli_main(["team", "--db", str(team["ada"]), "--import-new"]) == 0
    assert "4 run(s) and 1 experiment(s) added from bob@box-b" in capsys.readouterr().out
    assert cli_main(["team", "--db", str(team["ada"])]) == 0
    assert "imported" in capsys.readouterr().out
    monkeypatch.setenv("TUNING_LAB_TEAM_FOLDER", str(team["folder"] / "missing"))
    assert cli_main(["team", "--db", str(team["ada"])]) == 1
    assert "does not exist" in capsys.readouterr().err
