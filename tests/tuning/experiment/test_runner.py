"""The runner without an engine: cancel mid-run stops the load, keeps what finished and marks the
run cancelled; the next value never starts."""

from __future__ import annotations

import threading
from pathlib import Path

from store import open_db, queries
from tests.checks import wait_for
from tests.factories import plan_attached
from tests.fakes.fake_openai import FakeConfig, FakeOpenAIServer
from tuning.experiment.runner import run_experiment
from tuning.experiment.supervisor import cancel_experiment
from tuning.measure.traffic.workload import Workload


def test_cancel_stops_the_load_and_marks_the_run_cancelled(lab_home: Path) -> None:
    db_path = lab_home / "lab.db"
    wl = Workload(num_requests=400, concurrency=2, input_len=4, output_len=50, num_warmups=0)
    with FakeOpenAIServer(FakeConfig(model="m", itl_ms=20.0)) as srv:
        exp_id = plan_attached(db_path, "concurrency", [2, 4], wl, base_url=srv.base_url)
        result: dict[str, object] = {}
        worker = threading.Thread(target=lambda: result.update(ids=run_experiment(db_path, exp_id)))
        worker.start()
        db = open_db(db_path)
        # Cancel once the runner reports a finished request (its heartbeat writes the progress),
        # not after a fixed time: on a loaded box the first request may take longer than that.
        assert wait_for(
            lambda: queries.get_experiment(db, exp_id)["requests_done"] >= 1, timeout=60, poll=0.1
        )
        cancel_experiment(db_path, exp_id)
        worker.join(timeout=60)
        assert not worker.is_alive()
    exp = queries.get_experiment(db, exp_id)
    assert exp["status"] == "cancelled"
    runs = queries.list_runs(db, exp_id)
    assert len(runs) == 1 and runs[0]["status"] == "cancelled"  # the second value never started
    assert 0 < runs[0]["completed"] < 400
