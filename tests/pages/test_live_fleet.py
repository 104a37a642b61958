"""The Live page of a fleet experiment: every run in flight with its phase, slot and node."""

from __future__ import annotations

from typing import Any

from store import connect, queries, repo
from tests.apptest import open_page


def test_live_page_lists_fleet_runs_in_flight(dashboard_lab: dict[str, Any]) -> None:
    exp_id = dashboard_lab["live_exp"]
    with connect(dashboard_lab["db"]) as db:
        repo.update_experiment(db, exp_id, fleet_json={"mode": "local", "slots": 2})
        for run in queries.list_runs(db, exp_id, include_hidden=True):
            repo.update_run(
                db,
                run["id"],
                status="running",
                phase="loading",
                slot=f"node{run['id']}/0",
                node_host=f"gpu-{run['id']}",
                attempt=1,
            )
    at = open_page("pages/3_Live.py")
    assert not at.exception, at.exception
    tables = [d.value for d in at.dataframe if "slot" in d.value.columns]
    assert tables, "no runs table with the placement columns"
    table = tables[0]
    assert {"phase", "slot", "node"} <= set(table.columns)
    assert (table["phase"] == "loading").all() and table["slot"].str.endswith("/0").all()
