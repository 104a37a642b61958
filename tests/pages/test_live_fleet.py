"""The Live page of a fleet experiment: every run in flight with its phase, slot and node."""

from __future__ import annotations

from typing import Any

from store import connect, queries, repo
from tests.apptest import open_page, page_text


def test_live_page_lists_fleet_runs_in_flight(dashboard_lab: dict[str, Any]) -> None:
    exp_id = dashboard_lab["live_exp"]
    with connect(dashboard_lab["db"]) as db:
        repo.update_experiment(db, exp_id, fleet_json={"mode": "local", "slots": 2})
        runs = queries.list_runs(db, exp_id, include_hidden=True)
        for run in runs:
            repo.update_run(
                db,
                run["id"],
                status="running",
                phase="loading",
                slot=f"node{run['id']}/0",
                node_host=f"gpu-{run['id']}",
                attempt=1,
            )
    at = open_page("app_pages/3_Live.py")
    assert not at.exception, at.exception
    tables = [d.value for d in at.dataframe if "slot" in d.value.columns]
    assert tables, "no runs table with the placement columns"
    table = tables[0]
    assert {"phase", "slot", "node"} <= set(table.columns)
    assert (table["phase"] == "sending the workload").all()  # the phase `loading`, in words
    assert table["slot"].str.endswith("/0").all()
    # Every run in flight is listed; the charts and log are those of the run picked.
    text = page_text(at)
    assert f"{len(runs)} runs in flight" in text
    for run in runs:
        assert (
            f"run {run['id']}: max-num-seqs = {run['value']}, sending the workload on slot "
            f"node{run['id']}/0" in text
        )
    with_log = next(r for r in runs if r["id"] == dashboard_lab["live_run"])
    at.selectbox(key="live_flight").set_value(with_log["id"]).run()
    assert not at.exception, at.exception
    assert "live-log-marker" in page_text(at) and f"run {with_log['id']}, last lines" in page_text(
        at
    )
    other = next(r for r in runs if r["id"] != with_log["id"])
    at.selectbox(key="live_flight").set_value(other["id"]).run()
    assert f"run {other['id']}, last lines" in page_text(at)
    bars = [p.proto.text for p in at.get("progress")]
    assert any("requests done in the runs in flight" in b for b in bars), bars
