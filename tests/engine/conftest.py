"""One real experiment per test session, shared by every test that needs runs made by the engine."""

from __future__ import annotations

import json
from collections.abc import Callable
from subprocess import CompletedProcess
from typing import Any

import pytest

from tuning.engine.spec import EngineSpec


@pytest.fixture(scope="session")
def real_lab(
    built_engine: EngineSpec,
    tuning_cli: Callable[..., CompletedProcess[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, Any]:
    """max-num-seqs 2 vs 16 at concurrency 16 on the embedded engine, from the CLI."""
    home = tmp_path_factory.mktemp("real-lab")
    db = home / "lab.db"
    done = tuning_cli(
        [
            "experiment",
            "--repeats",
            "1",
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
            "--start-timeout",
            "600",  # a loaded 2-core machine can take minutes to fail a start
            "--db",
            str(db),
            "--json",
        ],
        home,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ids = json.loads(done.stdout.strip().splitlines()[-1])
    return {"home": home, "db": db, **ids}
