"""A run's findings on the Runs page (tuning.decide.findings): what its signals say, and one click
to queue the next experiment, which starts in its own runner process like any other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import streamlit as st
from sqlite_utils import Database

from store import queries
from tuning.decide.findings import NextExperiment, plan_suggested, stored_findings
from tuning.engine.current import current_spec
from tuning.engine.params import show_value
from tuning.experiment.lock import runner_busy
from tuning.experiment.supervisor import spawn_runner
from tuning.settings import load_settings
from ui.common import ICONS, lab_db_path, md_code, md_escape


def queue_next(db: Database, run: Mapping[str, Any], nxt: NextExperiment) -> int:
    """Plan the suggested experiment from the run and start its runner; its id."""
    settings = load_settings()
    experiment = queries.get_experiment(db, int(run["experiment_id"]))
    exp_id = plan_suggested(
        lab_db_path(),
        run,
        nxt,
        experiment,
        current_spec(settings),
        author=settings.resolved_author(),
        host=settings.resolved_host(),
    )
    spawn_runner(lab_db_path(), exp_id)
    return exp_id


def render_findings(db: Database, run: Mapping[str, Any], key: str) -> None:
    """Each finding with its evidence and a button per next experiment (disabled while one runs),
    read through the page's connection `db`."""
    found = stored_findings(db, run)
    st.markdown(f"**Findings for run {int(run['id'])}**")
    if not found:
        st.caption("No finding: its stored signals look healthy.")
        return
    busy = bool(queries.active_experiments(db)) or runner_busy()
    for i, f in enumerate(found):
        with st.container(border=True, key=f"{key}-{i}"):
            st.markdown(f"**{md_escape(f.title)}** · {md_escape(f.evidence)}")
            if f.advice:
                st.caption(md_escape(f.advice))
            for j, nxt in enumerate(f.next):
                values = ", ".join(show_value(nxt.param, v) for v in nxt.values)
                st.markdown(
                    f"Next: {md_code(nxt.param)} = {md_code(values)} · {md_escape(nxt.why)}"
                )
                st.code(nxt.command(run), language="bash")
                if st.button(
                    f"Queue: {nxt.param} = {values}",
                    key=f"{key}-{i}-{j}",
                    disabled=busy,
                    icon=":material/play_arrow:",
                    help="An experiment is running; one at a time per machine." if busy else None,
                ):
                    try:
                        exp_id = queue_next(db, run, nxt)
                    except ValueError as exc:
                        st.error(f"refused: {md_escape(exc)}")
                    else:
                        st.success(f"Experiment {exp_id} started in its own process.")
                        st.page_link(
                            "app_pages/3_Live.py", label="Watch it live", icon=ICONS["live"]
                        )
