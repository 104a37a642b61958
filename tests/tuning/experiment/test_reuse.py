"""Reuse (issue 25 item 3) on seeded labs: only runs with the planned run's exact fingerprint are
offered (not another workload, flag configuration, vLLM version or hardware, nor a failed, hidden
or not-applied run), a teammate's bundle in the team folder is offered with where it is, and
taking the offer copies the runs into the experiment marked with where they came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from store import connect, queries, repo
from tests.factories import WORKLOAD, add_experiment, add_run, engine_json, seed_clean_lab
from tuning.experiment.reuse import apply_offer, find_offer

HW = {"summary": "cpu-test", "cpus": 2}


@pytest.fixture
def engine(tiny_model: Path) -> dict[str, Any]:
    """The embedded engine on a model folder that exists (its config.json is part of a run's
    identity): the seeded runs' and the planned ones'."""
    return engine_json(model=str(tiny_model))


def _plan(
    path: Path,
    engine: dict[str, Any] | None,
    values: tuple[int, ...] = (2, 16),
    repeats: int = 2,
    **fields: Any,
) -> int:
    """A queued experiment defined as seed_lab's: the one an offer is made for."""
    with connect(path) as db:
        return add_experiment(
            db, values=values, repeats=repeats, status="queued", engine_json=engine, **fields
        )


def _offer(path: Path, exp_id: int, **kw: Any) -> dict[str, list[int]]:
    with connect(path, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
    offer = find_offer(path, exp, hw=HW, **kw)
    return {v.value: sorted(m.run_id or 0 for m in v.matches) for v in offer.values}


def test_only_the_exact_fingerprint_is_offered(tmp_path: Path, engine: dict[str, Any]) -> None:
    path = tmp_path / "lab.db"
    seeded = seed_clean_lab(path, values=(2, 16), repeats=1, engine=engine)  # values 2 and 16
    same2, same16 = seeded["run_ids"]
    rng = np.random.default_rng(1)
    with connect(path) as db:
        other = add_experiment(db, values=[2], engine_json=engine)
        wl = {**WORKLOAD, "num_requests": 25}
        add_run(db, other, seq=0, value=2, rng=rng, wl=wl)  # another workload
        add_run(db, other, seq=1, value=2, rng=rng, param="block-size")  # block-size 2, not 16
        add_run(db, other, seq=2, value=2, rng=rng, hardware="gpu-h100")  # other hardware
        newer = add_run(db, other, seq=3, value=2, rng=rng)
        repo.update_run(db, newer, vllm_version="0.33.0")  # another vLLM
        failed = add_run(db, other, seq=4, value=2, rng=rng, status="failed")
        hidden = add_run(db, other, seq=5, value=2, rng=rng)
        repo.update_run(db, hidden, hidden=1)
        ignored = add_run(db, other, seq=6, value=2, rng=rng)
        mismatch = [{"param": "max-num-seqs", "asked": 2, "effective": "16", "reason": "x"}]
        repo.update_run(db, ignored, config_mismatch_json=mismatch)
        applied = add_run(db, other, seq=7, value=2, rng=rng)
        repo.update_run(db, applied, config_mismatch_json=[])  # checked: all applied
    assert failed and _offer(path, _plan(path, engine)) == {"2": [same2, applied], "16": [same16]}
    # another workload or baseline in the plan: nothing it could count
    other_wl = {**WORKLOAD, "seed": 9}
    assert _offer(path, _plan(path, engine, workload_json=other_wl)) == {"2": [], "16": []}
    other_base = {"block-size": 32, "enforce-eager": True}
    assert _offer(path, _plan(path, engine, config_json=other_base)) == {"2": [], "16": []}
    attached = _plan(path, None, base_url="http://127.0.0.1:9/v1")
    assert _offer(path, attached) == {"2": [], "16": []}  # no engine of ours to vouch for it


def test_taking_the_offer_fills_free_positions_and_says_where_from(
    tmp_path: Path, engine: dict[str, Any]
) -> None:
    path = tmp_path / "lab.db"
    seeded = seed_clean_lab(
        path, values=(2, 16), repeats=1, author="ana", host="box", engine=engine
    )
    exp_id = _plan(path, engine, repeats=2)
    with connect(path, readonly=True) as db:
        offer = find_offer(path, queries.get_experiment(db, exp_id), hw=HW)
    assert offer.count == 2
    line = offer.lines()[0]
    assert line.startswith(
        f"1 earlier run matches max-num-seqs = 2 exactly (run {seeded['run_ids'][0]}, "
    )
    assert line.endswith(", by ana@box)")
    copies = apply_offer(path, exp_id, offer)
    with connect(path, readonly=True) as db:
        runs = queries.list_runs(db, exp_id, include_hidden=True)
        exp = queries.get_experiment(db, exp_id)
        source = queries.get_run(db, seeded["run_ids"][0])
        n_req = (
            len(queries.get_requests(db, copies[0])),
            len(queries.get_requests(db, source["id"])),
        )
    assert [r["id"] for r in runs] == copies and [r["seq"] for r in runs] == [0, 1]
    first = runs[0]
    assert first["reused_from"]["uid"] == source["uid"] and first["uid"] != source["uid"]
    assert first["reused_from"]["run_id"] == source["id"] and first["author"] == "ana"
    assert first["summary"] == source["summary"] and n_req[0] == n_req[1] > 0
    assert exp["runs_done"] == 2  # of 4: the runner measures the second round only
    # the same offer again finds the copies as the same evidence, and no free place for more
    with connect(path, readonly=True) as db:
        again = find_offer(path, queries.get_experiment(db, _plan(path, engine)), hw=HW)
    assert [len(v.matches) for v in again.values] == [1, 1]


def test_a_teammates_bundle_is_offered_and_imported_when_counted(
    team: dict[str, Any],
) -> None:
    team["publish_bob"]()  # bob's sweep (max-num-seqs 2, 16 x 2) on gpu-h100
    ada = team["ada"]
    exp_id = _plan(ada, team["engine"], repeats=3)
    with connect(ada, readonly=True) as db:
        exp = queries.get_experiment(db, exp_id)
    bob_hw = {"summary": "gpu-h100", "cpus": 2}  # bob's machine as his runs describe it
    offer = find_offer(ada, exp, hw=bob_hw, team_folder=str(team["folder"]))
    (m, _) = offer.values[0].matches
    assert m.run_id is None and m.where.startswith("team folder: bob-box_b-")
    assert m.author == "bob" and m.origin.startswith("bundle:") and "from bob@box-b" in m.origin
    assert "imported (bundle:" in offer.lines()[0] and offer.count == 4
    assert find_offer(ada, exp, hw=bob_hw).count == 0  # not looked for without the folder
    copies = apply_offer(ada, exp_id, offer)
    with connect(ada, readonly=True) as db:
        runs = queries.list_runs(db, exp_id, include_hidden=True)
    assert len(copies) == 4 and {r["reused_from"]["where"] for r in runs} == {m.where}
    assert all(r["origin"].startswith("bundle:") for r in runs)  # labelled as a teammate's
