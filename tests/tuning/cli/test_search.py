"""`python -m tuning search`: Ctrl-C during a step ends it as `experiment` does: exit 130, one
line, no traceback, the search and its step's experiment cancelled (not left running)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from store import connect, queries
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tests.tuning.experiment.test_runner_states import cli, wait_phase


@pytest.fixture
def slow_server() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer(FakeConfig(model="m", itl_ms=20.0)) as srv:
        yield srv


def test_ctrl_c_in_a_search_cancels_it_without_a_traceback(
    lab_home: Path, slow_server: FakeOpenAIServer
) -> None:
    db_path = lab_home / "lab.db"
    proc = cli(
        *("search", "--param", "concurrency", "--range", "1:8", "--budget-runs", "3"),
        *("--base-url", slow_server.base_url, "--model", "m", "--num-requests", "400"),
        *("--output-len", "50", "--input-len", "4", "--num-warmups", "0", "--db", str(db_path)),
        env={"TUNING_LAB_HOME": str(lab_home), "TUNING_LAB_LOCK": str(lab_home / "lock")},
    )
    wait_phase(db_path, 1, "loading")
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    said = [line for line in err.splitlines() if "interrupted" in line]
    assert len(said) == 1 and said[0].startswith("interrupted"), err
    with connect(db_path, readonly=True) as db:
        (search,) = queries.list_searches(db)
        exp = queries.get_experiment(db, 1)
        runs = queries.list_runs(db, 1, include_hidden=True)
    assert search["status"] == "cancelled" and "interrupted" in search["error"]
    assert exp["status"] == "cancelled" and "interrupted" in exp["error"]
    assert [r["status"] for r in runs] == ["cancelled"]
