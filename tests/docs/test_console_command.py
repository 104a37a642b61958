"""The `tuning-lab` console command (pyproject.toml, installed by `make setup`) is the lab's CLI:
the same parser and the same exit codes as `python -m tuning`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import tuning.cli.main

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "tuning-lab"
MISSING = f"{SCRIPT} is missing: run `make setup` (its deps step runs `pip install --no-deps -e .`)"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO)


def test_the_script_entry_is_the_cli_main() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    module, _, attr = project["scripts"]["tuning-lab"].partition(":")
    target = getattr(__import__(module, fromlist=[attr]), attr)
    assert target is tuning.cli.main.main


def test_tuning_lab_help_is_python_m_tuning_help() -> None:
    assert SCRIPT.exists(), MISSING
    script = _run(str(SCRIPT), "--help")
    module = _run(sys.executable, "-m", "tuning", "--help")
    assert script.returncode == 0, script.stderr
    assert "vLLM Tuning Lab: one variable at a time." in script.stdout
    # the same help; each names the program as it was run (issue 40: usage from argv[0])
    assert script.stdout.startswith("usage: tuning-lab ")
    assert module.stdout.startswith("usage: python -m tuning ")
    same = " ".join(module.stdout.replace("python -m tuning", "tuning-lab").split())
    assert " ".join(script.stdout.split()) == same


def test_tuning_lab_refuses_bad_input_like_python_m_tuning(tmp_path: Path) -> None:
    assert SCRIPT.exists(), MISSING
    db = tmp_path / "lab.db"
    script = _run(str(SCRIPT), "experiment", "--repeats", "-5", "--db", str(db))
    assert script.returncode == 2
    assert "--repeats" in script.stderr
    assert not db.exists()
