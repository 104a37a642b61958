"""Issue 41 case 1, the team folder: a forged bundle that copies this lab's hardware string (and
its engine and workload, all printed in every bundle the lab publishes) was offered like a
teammate's measurement. A bundle is offered only when its integrity holds: its runs' numbers must
be what their own request rows give. This lab's own runs are still offered beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from store import connect, queries, repo
from store.team import publish
from tests.factories import add_experiment, seed_clean_lab
from tuning.experiment.reuse import find_offer
from tuning.measure.metrics import summarize

ADA_HW = {"summary": "cpu-2core", "cpus": 2}  # ada's machine as her runs describe it
FORGED_TOK_S = 252_453.0

Forge = Callable[[Any, int, dict[str, Any]], None]


def _claim_throughput(db: Any, run_id: int, summary: dict[str, Any]) -> None:
    """The numbers edited, the request rows left as measured."""
    repo.store_summary(db, run_id, {**summary, "output_throughput": FORGED_TOK_S})


def _shrink_duration(db: Any, run_id: int, summary: dict[str, Any]) -> None:
    """Every number recomputed from the request rows, over a duration they could not fit in."""
    again = summarize(queries.get_requests(db, run_id), 0.004)
    repo.store_summary(db, run_id, {**summary, **again})


@pytest.mark.parametrize(
    ("forge", "why"),
    [
        (_claim_throughput, "claims output_throughput 252,453.0, but its own 24 request rows"),
        (_shrink_duration, "after the run's whole duration of 0.004 s"),
    ],
    ids=["throughput-edited", "duration-shrunk"],
)
def test_a_forged_bundle_with_a_copied_hardware_string_is_not_offered(
    team: dict[str, Any], forge: Forge, why: str
) -> None:
    folder, ada = team["folder"], team["ada"]
    mallory = Path(folder).parent / "mallory.db"
    forged = seed_clean_lab(  # ada's hardware string, engine and workload: copied
        mallory, "mallory", "box-m", hardware=ADA_HW["summary"], seed=9, engine=team["engine"]
    )
    with connect(mallory) as db:
        for run in queries.list_runs(db, forged["experiment_id"]):
            forge(db, run["id"], run["summary"])
    publish(mallory, folder, experiment_ids=[forged["experiment_id"]], author="m", host="box-m")
    with connect(ada) as db:
        exp_id = add_experiment(
            db, values=(2, 16), repeats=3, status="queued", engine_json=team["engine"]
        )
        exp = queries.get_experiment(db, exp_id)
    offer = find_offer(ada, exp, hw=ADA_HW, team_folder=str(folder))
    matches = [m for v in offer.values for m in v.matches]
    with connect(ada, readonly=True) as db:
        own = {r["uid"] for r in queries.list_runs(db, team["ada_info"]["experiment_id"])}
    assert matches and {m.uid for m in matches} <= own  # ada's own runs, none of mallory's
    assert all(m.where == "this lab" for m in matches)
    (note,) = offer.notes  # the bundle's file is named after its author and host
    assert note.startswith("team bundle m-box_m-") and " not offered: run " in note
    assert why in note and "\n" not in note
