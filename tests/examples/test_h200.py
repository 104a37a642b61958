"""The H200 runs committed under examples/h200 load in the compare page and the CLI, and their
samples show what the GPU did: EngineCore holds the memory, one step at KV-cache allocation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from store import open_db, queries, snapshot, timeseries
from tests.apptest import open_page, page_text, with_query
from tests.examples import lab_of

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "h200" / "lab-h200.db.xz"
GIB = 2**30


@pytest.fixture
def h200_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return lab_of(EXAMPLE, tmp_path, monkeypatch)


def test_runs_are_complete_and_on_an_h200(h200_db: Path) -> None:
    db = open_db(h200_db)
    runs = queries.list_runs(db)
    assert len(runs) == 8
    for run in runs:
        assert run["status"] == "done" and run["failed"] == 0 and run["completed"] == 512
        assert "H200" in run["hardware"] and run["vllm_version"] == "0.25.0"


def test_engine_core_holds_the_memory_with_a_step_at_kv_allocation(h200_db: Path) -> None:
    db = open_db(h200_db)
    for run in queries.list_runs(db):
        procs = timeseries.get_samples(db, run["id"], ["gpu_proc_bytes"])
        labels = {s["label"] for s in procs}
        assert labels and all(label.startswith("EngineCore:") for label in labels)
        assert run["startup"]["engine_pids"]["EngineCore"] == int(labels.pop().split(":")[1])
        tree = [s for s in timeseries.get_samples(db, run["id"], ["gpu_tree_bytes"])]
        peak = max(s["value"] for s in tree)
        assert peak > 60 * GIB
        # The step: from weights only (< 5 GiB) to near the peak within 5 s.
        before = [s["t_s"] for s in tree if s["value"] < 5 * GIB]
        after = [s["t_s"] for s in tree if s["value"] > 0.9 * peak]
        assert before and after and 0 < min(after) - max(t for t in before if t < min(after)) < 5


def test_compare_page_and_cli_load_them(
    h200_db: Path, tuning_cli: Callable[..., CompletedProcess[str]]
) -> None:
    at = open_page("app_pages/4_Compare.py", with_query("experiment", 1))
    assert not at.exception, at.exception
    assert "gpu-memory-utilization" in page_text(at)
    out = tuning_cli(
        ["compare", "--db", str(h200_db), "--experiment", "2"], h200_db.parent, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "max-num-seqs" in out.stdout and "mean TTFT" in out.stdout


def test_the_fleet_ran_on_the_h200_with_its_placement_stored() -> None:
    """Step (g): `--fleet local --slots 1` on the H200, two values one after the other through
    one slot; each run names the GPU Ray gave it, and its memory is that GPU's."""
    db = snapshot.expanded(EXAMPLE.with_name("lab-h200-fleet.db.xz"))
    with open_db(db, readonly=True) as conn:
        (exp,) = queries.list_experiments(conn)
        runs = queries.list_runs(conn)
    assert exp["fleet"]["mode"] == "local" and exp["fleet"]["slots"] == 1
    assert [r["status"] for r in runs] == ["done", "done"]
    for run in runs:
        place = run["placement"]
        assert place["gpu_model"] == "NVIDIA H200" and place["cuda_visible_devices"] == "0"
        assert len(run["gpu_uuids"]) == 1 and run["gpu_uuids"][0].startswith("GPU-")
        assert run["slot"] == place["slot"] and run["node_id"] == place["node_id"]
        assert run["completed"] == 2048 and run["failed"] == 0
        # the server's own GPU memory: at least its KV budget, and on the GPU it was given
        assert run["peak_gpu_tree_bytes"] > int(run["value"])


def test_the_fleet_rerun_on_the_h200_finished_every_run_after_the_write_all_fix() -> None:
    """After the load generator's child wrote every frame whole (a fleet 16G run had failed with
    `UnpicklingError: pickle data was truncated`), step (g) twice in one session: four runs
    through the fleet, both 16G runs among them, every run done with all its requests."""
    db = snapshot.expanded(EXAMPLE.with_name("lab-h200-fleet-rerun.db.xz"))
    with open_db(db, readonly=True) as conn:
        exps = queries.list_experiments(conn)
        runs = queries.list_runs(conn)
    assert [e["fleet"]["mode"] for e in exps] == ["local", "local"]
    assert sorted(int(r["value"]) for r in runs) == [4 * GIB, 4 * GIB, 16 * GIB, 16 * GIB]
    for run in runs:
        assert run["status"] == "done", run["error"]
        assert run["completed"] == 2048 and run["failed"] == 0
        assert run["placement"]["gpu_model"] == "NVIDIA H200"
        assert run["peak_gpu_tree_bytes"] > int(run["value"])
