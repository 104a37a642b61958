"""Issue 41 case 12: `plan --report /proc/self/mem` failed after every run of the plan. Every
output file (`--out` of plan, report, export, chart and bench) is checked
before any work: one line naming the flag, nothing run, nothing created (not even a folder)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.factories import seed_clean_lab
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.cli.main import main as cli_main

PLAN = ["plan", "--params", "concurrency", "--param-range", "concurrency=1:2", "--coarse", "2"]
PLAN += ["--budget-runs", "2", "--confirm-repeats", "2", "--num-requests", "2", "--model", "m"]


def _one_line(capsys: pytest.CaptureFixture[str], *words: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("refused:"), err[-3000:]
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def test_a_plan_report_that_cannot_be_written_is_refused_before_any_run(
    lab_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = lab_home / "lab.db"
    with FakeOpenAIServer(FakeConfig(model="m")) as srv:
        args = [*PLAN, "--base-url", srv.base_url, "--db", str(db)]
        code = cli_main([*args, "--out", "/proc/self/mem"])
        asked = list(srv.stats.paths)
    assert code == 1
    _one_line(capsys, "--out /proc/self/mem")
    assert asked == [] and not db.exists()  # no run, no DB


@pytest.fixture
def lab(tmp_path: Path, lab_home: Path) -> Path:
    path = tmp_path / "lab.db"
    seed_clean_lab(path, values=(2, 4), repeats=1)
    return path


@pytest.mark.parametrize(
    ("command", "flag"),
    [
        (["report", "--experiment", "1"], "--out"),
        (["export", "--experiment", "1"], "--out"),
        (["chart", "--experiment", "1"], "--out"),
    ],
)
@pytest.mark.parametrize("where", ["under-a-file", "fifo", "folder"])
def test_an_output_that_cannot_be_a_file_is_refused_and_nothing_is_created(
    command: list[str],
    flag: str,
    where: str,
    lab: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    name = {"report": "r.html", "export": "r.bundle.zip", "chart": "r.png"}[command[0]]
    if where == "under-a-file":  # a missing folder below a file: it used to be tried at the end
        (out_dir / "notes.txt").write_text("mine")
        target = out_dir / "notes.txt" / "new" / name
    elif where == "fifo":  # not a regular file: a pipe would block the write, or be replaced
        target = out_dir / name
        os.mkfifo(target)
    else:
        target = out_dir / name
        target.mkdir()
    before = sorted(p.name for p in out_dir.rglob("*"))
    assert cli_main([*command, "--db", str(lab), flag, str(target)]) == 1
    _one_line(capsys, f"{flag} {target}")
    assert sorted(p.name for p in out_dir.rglob("*")) == before


def test_a_missing_folder_is_created_only_when_the_file_is_written(
    lab: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new" / "deeper" / "r.html"
    assert cli_main(["report", "--experiment", "1", "--db", str(lab), "--out", str(target)]) == 0
    assert target.is_file()
    assert not list(tmp_path.rglob(".tuning-lab-probe-*"))  # the write probe left nothing


def test_an_output_onto_the_lab_db_is_refused(
    lab: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = lab.stat().st_size
    assert cli_main(["export", "--experiment", "1", "--db", str(lab), "--out", str(lab)]) == 1
    _one_line(capsys, "the lab's database")
    assert lab.stat().st_size == size
