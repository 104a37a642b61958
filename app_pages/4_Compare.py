"""Compare: baseline vs candidates of one experiment (or any runs), with the experiment's decision
first, then verdicts and exports. The runs are read once; one report model (tuning.present.model)
feeds every part of the page.

Preselect with query parameters: ?experiment=3, or ?runs=1,2,3&baseline=1 (any runs); the
session_state key `cmp_run_ids` (a list of ids) does the same for tests and the benchmark.
"""

from __future__ import annotations

import streamlit as st

from store import queries
from tuning.compare.context import comparison_context
from tuning.compare.selection import SelectionError, gather_runs
from tuning.decide.reaper import reap_dead
from tuning.decide.search.names import shown_names
from tuning.present.model import build_model
from ui import compare as view
from ui.common import ICONS, db, lab_db_path
from ui.decision import render_decision
from ui.health import warn_unhealthy
from ui.startup import render_startup
from ui.summary import render_summary
from ui.time_spent import render_time_spent
from ui.tradeoff import render_tradeoffs

st.set_page_config(
    page_title="Compare · vLLM Tuning Lab", page_icon=ICONS["compare"], layout="wide"
)
st.title("Compare")
st.caption(
    "One parameter changed, everything else equal: each candidate value against the "
    "baseline, with a verdict only where the repeats support one."
)

reap_dead(lab_db_path())  # a killed runner's runs read failed, not running
conn = db()
preset = view.parse_id_list(st.query_params.get_all("runs")) or view.parse_id_list(
    st.session_state.get("cmp_run_ids")
)
preset_base = view.parse_id_list(st.query_params.get_all("baseline"))
experiments = queries.list_experiments(conn)
options: list[int | None] = ([None] if preset else []) + [int(e["id"]) for e in experiments]
if not options:
    st.info("Nothing to compare yet: run an experiment from **New experiment**.")
    st.stop()
shown = shown_names(conn, experiments)  # a search's step by its search's id, not its key
names = {
    int(e["id"]): f"experiment {e['id']}: {shown[int(e['id'])]} ({e['status']})"
    for e in experiments
}
wanted = view.parse_id_list(st.query_params.get("experiment"))
if preset:
    index = 0
elif wanted and wanted[0] in options:
    index = options.index(wanted[0])
else:  # the latest experiment with two or more values: a one-run search step has no candidate
    index = view.default_experiment(experiments)
scope = st.selectbox(
    "Runs of",
    options,
    index=index,
    key="cmp_experiment",
    format_func=lambda i: f"the {len(preset)} runs from the link" if i is None else names[i],
)
try:
    runs, experiments_named = gather_runs(
        conn,
        run_ids=preset if scope is None else (),
        experiment_ids=[] if scope is None else [scope],
    )
except SelectionError as exc:  # a link naming deleted runs, or an experiment without runs
    st.info(f"Nothing to compare: {exc}.")
    st.stop()
scope_key = "runs" if scope is None else f"exp{scope}"
baseline_ids, candidate_ids = view.pick_sides(runs, scope_key, preset_base)
slo, margin = view.render_knobs()
if not baseline_ids:
    st.warning("Pick at least one baseline run.")
    st.stop()
picked = set(baseline_ids) | set(candidate_ids)
include_suspect = view.suspect_toggle([r for r in runs if int(r["id"]) in picked])
model = build_model(  # the runs as loaded above: nothing is read twice
    conn,
    experiment_ids=[] if scope is None else [scope],
    baseline_ids=baseline_ids,
    slo=slo,
    margin=margin,
    include_suspect=include_suspect,
    runs=[r for r in runs if int(r["id"]) in picked],
    experiments=experiments_named,
    named_runs=scope is None,
    db_hint=str(lab_db_path()),
)
comparison = model.comparison
render_decision(model, lab_db_path())  # the decision, first
view.render_checks(comparison)
render_summary(comparison)
warn_unhealthy(model.runs)
if not comparison.candidates:
    st.info("No candidate side yet: pick runs of another value as candidates.")
report = view.report_request(lab_db_path(), runs, list(picked), baseline_ids, slo, scope)
view.render_table(comparison, scope, report, model.extra_json())
render_startup(comparison, model.runs)
render_time_spent(conn, model.runs, "cmp_time_spent")  # where each experiment's time went
context = comparison_context(model.runs, comparison).lines()  # what every export says it is of
view.render_charts(conn, comparison, scope, context)
render_tradeoffs(conn, lab_db_path(), comparison, scope, context)
view.render_definitions()
