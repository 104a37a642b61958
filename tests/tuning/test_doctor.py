"""`python -m tuning doctor` (issue 11, item 14): one line per check, a fix under each problem,
exit 1 on a problem, and nothing it looks at is changed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store import connect, open_db
from store.schema import migrations
from tests.fakes.engines import fake_settings_env, foreign_listener
from tests.fakes.fake_nvml import FakeNvml
from tuning.engine.doctor import check_db, check_gpu, check_team, diagnose
from tuning.engine.launch import free_port
from tuning.settings import load_settings

Cli = Callable[..., Any]


def by_check(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["check"]: f for f in findings}


def test_a_ready_lab_has_no_problem(
    fresh_db: Path, lab_home: Path, tuning_cli: Cli, tmp_path: Path
) -> None:
    team = tmp_path / "team"
    team.mkdir()
    env = {**fake_settings_env(lab_home), "TUNING_LAB_TEAM_FOLDER": str(team)}
    env["TUNING_LAB_ENGINE_BACKEND"] = "cpu"  # no GPU here, and none needed
    out = tuning_cli(["doctor", "--port", str(free_port())], lab_home, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[-1] == "no problems found"
    checks = [line.split()[1].rstrip(":") for line in lines[:-1]]
    assert checks == ["engine", "model", "gpu", "port", "disk", "db", "schema", "wal", "team"]
    assert all(line.startswith("ok") for line in lines[:-1])


def test_every_problem_is_one_line_with_its_fix_and_exit_1(
    lab_home: Path, tuning_cli: Cli, tmp_path: Path
) -> None:
    lab_home.mkdir(parents=True)
    db = lab_home / "lab.db"
    db.write_bytes(b"this is not a database at all" * 100)
    not_a_folder = tmp_path / "team.txt"
    not_a_folder.write_text("x")
    env = {
        **fake_settings_env(lab_home),
        "TUNING_LAB_TEAM_FOLDER": str(not_a_folder),
        "TUNING_LAB_ENGINE_COMMAND": f"{sys.executable} -m vllm.entrypoints.openai.api_server",
    }
    with foreign_listener() as busy:
        out = tuning_cli(["doctor", "--json", "--port", str(busy.port)], lab_home, env=env)
        text = tuning_cli(["doctor", "--port", str(busy.port)], lab_home, env=env).stdout
        assert busy.untouched()
    assert out.returncode == 1, out.stderr
    report = json.loads(out.stdout)
    found = by_check(report["findings"])
    assert report["ok"] is False
    problems = {name for name, f in found.items() if not f["ok"]}
    # the lab's venv has no vLLM; no NVML for a GPU engine; a foreign listener; a garbage DB
    assert problems == {"engine", "gpu", "port", "db", "team"}, found
    assert "vllm does not import" in found["engine"]["detail"]
    assert f"pid {busy.pid}" in found["port"]["detail"]
    assert "not a database" in found["db"]["detail"]
    assert all(f["fix"] for f in found.values() if not f["ok"])
    assert text.count("PROBLEM") == 5 and text.count("fix: ") == 5
    assert text.splitlines()[-1] == "5 problem(s)"


def test_a_db_from_a_newer_lab_is_a_problem_and_no_wal_a_note(fresh_db: Path) -> None:
    with connect(fresh_db) as db:
        db.table(migrations.migrations_table).insert(
            {"migration_set": migrations.name, "name": "m999_from_the_future", "applied_at": "x"}
        )
        db.execute("PRAGMA journal_mode=DELETE")
    found = {f.check: f for f in check_db(fresh_db)}
    assert found["db"].ok
    assert not found["schema"].ok and "m999_from_the_future" in found["schema"].detail
    assert found["wal"].ok and "journal mode delete" in found["wal"].detail


def test_doctor_never_writes_to_the_db(fresh_db: Path) -> None:
    with connect(fresh_db) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for side in ("-wal", "-shm"):
        Path(f"{fresh_db}{side}").unlink(missing_ok=True)
    before = fresh_db.read_bytes()
    findings = diagnose(load_settings(), fresh_db, port=free_port(), import_check=False)
    assert {f.check for f in findings if f.check in ("db", "schema", "wal")} == {
        "db",
        "schema",
        "wal",
    }
    assert fresh_db.read_bytes() == before
    assert not Path(f"{fresh_db}-wal").exists()


def test_an_old_db_says_its_migrations_run_on_next_write(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = open_db(path)
    db.execute(
        f"DELETE FROM [{migrations.migrations_table}] WHERE name = ?",
        [migrations.applied(db)[-1].name],
    )
    db.conn.commit()
    db.conn.close()
    found = {f.check: f for f in check_db(path)}
    assert found["schema"].ok and "1 migration(s) run on next write" in found["schema"].detail


@pytest.mark.parametrize(("backend", "ok"), [("cpu", True), ("gpu", False)])
def test_no_nvml_is_a_problem_only_for_a_gpu_engine(backend: str, ok: bool) -> None:
    nvml = FakeNvml()
    nvml.fail_init = True
    finding = check_gpu(backend, nvml)
    assert finding.ok is ok and "NVML not available" in finding.detail
    assert ok or "driver" in finding.fix


def test_visible_gpus_are_listed() -> None:
    finding = check_gpu("gpu", FakeNvml(devices=2))
    assert finding.ok and finding.detail.startswith("2 visible")


def test_a_team_folder_that_cannot_be_written(tmp_path: Path) -> None:
    assert check_team("").ok
    assert check_team(str(tmp_path)).ok
    missing = check_team(str(tmp_path / "gone"))
    assert not missing.ok and "mount the share" in missing.fix
