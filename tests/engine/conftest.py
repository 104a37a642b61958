"""One real experiment per test session, shared by every test that needs runs made by the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import engine_available

REPO = Path(__file__).resolve().parents[2]


def run_cli(args: list[str], home: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TUNING_LAB_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "tuning", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="session")
def real_lab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """max-num-seqs 2 vs 16 at concurrency 16 on the embedded engine, from the CLI."""
    if not engine_available():
        if os.environ.get("TUNING_LAB_REQUIRE_ENGINE"):
            pytest.fail("the embedded engine is not built: run `make setup`")
        pytest.skip("embedded engine not built (run `make setup`)")
    home = tmp_path_factory.mktemp("real-lab")
    db = home / "lab.db"
    done = run_cli(
        [
            "experiment",
            "--param",
            "max-num-seqs",
            "--values",
            "2,16",
            "--concurrency",
            "16",
            "--num-requests",
            "64",
            "--input-len",
            "64",
            "--output-len",
            "64",
            "--db",
            str(db),
            "--json",
        ],
        home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ids = json.loads(done.stdout.strip().splitlines()[-1])
    return {"home": home, "db": db, **ids}
