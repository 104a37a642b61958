"""Set up an experiment: one flag of the user's vLLM (any it defines but the refused ones), its
values, the baseline and the workload."""

from __future__ import annotations

import streamlit as st

from core.json_depth import nesting_words, too_deep
from store.snapshot import is_compressed, read_only_words
from tuning.decide.fleet import FleetError, attach_fleet, describe_options, options_from_settings
from tuning.engine.current import current_spec
from tuning.engine.flags.catalog import CatalogError
from tuning.engine.learn import needs_catalog, prepare
from tuning.engine.params import ParamError, format_value
from tuning.engine.shown import show_value
from tuning.engine.validate import parse_assignments, parse_values, validate_config
from tuning.experiment.plan import plan_experiment
from tuning.experiment.primaries import declare as declare_primaries
from tuning.experiment.supervisor import spawn_runner
from tuning.measure.traffic.workload import Workload
from tuning.settings import configured_db_path, load_settings
from ui.common import ICONS, db_path, md_code, md_escape
from ui.estimate import render_estimate
from ui.experiment_form import (
    confirm_many_runs,
    render_name,
    render_repeats,
    warn_single_value,
)
from ui.flag_picker import CHECKING, engine_flags, render_picker, resolve_baseline
from ui.holder import render_holder
from ui.predict import render_prediction
from ui.primaries import render_primaries
from ui.reuse import render_reuse_offer, take_offer
from ui.search import render_search_mode
from ui.workload import traffic_section

st.set_page_config(
    page_title="New experiment · vLLM Tuning Lab", page_icon=ICONS["new"], layout="wide"
)
st.title("New experiment")
st.caption("Exactly one parameter changes between the runs; everything else stays as the baseline.")

settings = load_settings()
spec = current_spec(settings)
modes = {
    "values": "Run the values I choose",
    "search": "Search one parameter (the lab picks the values)",
}
mode = st.radio("Mode", list(modes), key="new_mode", horizontal=True, format_func=modes.get)
if mode == "search":
    render_search_mode(db_path(), spec, settings)
    st.stop()
default_lines = "\n".join(f"{k}={format_value(v)}" for k, v in spec.baseline.items())
typed_baseline, _ = parse_assignments(
    str(st.session_state.get("new_baseline", default_lines)).splitlines(), "baseline line"
)
picked = render_picker(db_path(), spec, typed_baseline)
if picked.param is None:
    st.stop()
param = picked.param

errors: list[str] = []
st.session_state.setdefault("new_values", "2,16")  # a new choice flag suggests its choices
values_text = st.text_input(
    "Values (comma-separated)",
    key="new_values",
    help="A JSON value keeps its own commas; text that holds a comma goes in double quotes: "
    '"AWS_,HF_",OTHER_ is two values.',
)
try:
    if too_deep(values_text):  # refused before the JSON parser recurses
        raise ParamError(f"{param.name}: {nesting_words()}")
    values = parse_values(param.name, values_text, picked.learned)
    st.caption(
        "will run: "
        + " · ".join(md_code(show_value(param.name, v, picked.learned)) for v in values)
    )
except ParamError as exc:
    values = []
    errors.append(str(exc))
    st.error(md_escape(exc))
warn_single_value(param.name, values)
values_slot = st.empty()  # vLLM's own refusal of a value, on Start
name = render_name(param.name, values)

with st.expander("Baseline configuration", expanded=False):
    baseline_text = st.text_area(
        "NAME=VALUE, one per line: any flag of your vLLM (the engine's defaults otherwise)",
        value=default_lines,
        key="new_baseline",
        height=120,
    )
    typed, bad_lines = parse_assignments(baseline_text.splitlines(), "baseline line")
    errors += bad_lines + [
        f"baseline {k}: {nesting_words()}" for k, v in typed.items() if too_deep(v)
    ]
    typed = {k: v for k, v in typed.items() if not too_deep(v)}
    catalog = picked.catalog  # read by the picker when the baseline needs it
    if catalog is None and needs_catalog(typed):  # the baseline was just edited
        catalog = engine_flags(db_path(), spec, read=True).catalog
    baseline, base_learned, refused = resolve_baseline(typed, catalog)
    errors += refused
    learned = {**base_learned, **picked.learned}
    try:
        validate_config(baseline, spec.backend, learned)
    except ParamError as exc:
        errors.append(f"baseline: {exc}")
    if baseline.get(param.name) is not None:
        st.caption(f"{param.name} in the baseline is replaced by each value.")
for err in errors:
    if not err.startswith(param.name + ":"):
        st.error(md_escape(err))
baseline_slot = st.empty()  # vLLM's own refusal of a baseline flag, on Start
if not errors and param.source == "curated":
    render_prediction(spec, param, values, baseline)

st.subheader("Workload")
c1, c2, c3, c4 = st.columns(4)
num_requests = c1.number_input("Requests", 1, 100000, 64, key="new_requests")
concurrency = c2.number_input("Concurrency", 1, 10000, 16, key="new_concurrency")
input_len = c3.number_input("Input tokens", 1, 100000, 64, key="new_input")
output_len = c4.number_input("Output tokens", 1, 100000, 64, key="new_output")
c5, c6, c7 = st.columns(3)
prefix_len = c5.number_input("Shared prefix tokens", 0, 100000, 0, key="new_prefix")
endpoint = c6.selectbox("Endpoint", ["completions", "chat"], key="new_endpoint")
seed = c7.number_input("Seed", 0, 2**31 - 1, 0, key="new_seed")
repeats = render_repeats()
primaries = render_primaries()  # what decides it (ui.primaries), stored once it is planned
with st.expander("Real traffic: data file, request rate, conversations", expanded=False):
    classic = dict(
        num_requests=int(num_requests),
        concurrency=int(concurrency),
        input_len=int(input_len),
        output_len=int(output_len),
        shared_prefix_len=int(prefix_len),
        seed=int(seed),
    )
    traffic, traffic_errors = traffic_section(db_path(), classic, param.name)
    errors += traffic_errors
    for err in traffic_errors:
        st.error(err)
base_url = ""
if not param.restarts_server:
    base_url = st.text_input(
        "Attach to a running server (base URL, optional)",
        "",
        key="new_base_url",
        help="Leave empty to start the lab's engine. The API key, if any, "
        "comes from OPENAI_API_KEY in the lab's environment.",
    )
model = st.text_input("Model name on that server", "", key="new_model") if base_url else None

fleet_options, fleet_error = None, None
try:
    fleet_options = options_from_settings(settings)
except FleetError as exc:
    fleet_error = str(exc)
on_fleet = st.checkbox(
    "Run on the fleet",
    value=False,
    key="new_fleet",
    disabled=fleet_options is None or bool(base_url),
    help="Runs in parallel through Ray, as set in Settings → Fleet (not when attaching).",
)
st.caption(f"fleet: {md_escape(fleet_error)}" if fleet_error else describe_options(fleet_options))
render_estimate(
    db_path(),
    None if base_url else spec,
    {**classic, "endpoint": endpoint},
    len(values),
    repeats.first_rounds,
    param.restarts_server,
    base_url=base_url or None,
    model=model or None,
    auto=repeats.auto,
)
busy = render_holder(db_path(), "One at a time per machine: Start is off until it ends.")
if is_compressed(configured_db_path()):  # results would live only in the cached expansion
    busy = True
    st.error(md_escape(read_only_words(configured_db_path(), "TUNING_LAB_DB={plain}")))
workload = Workload(**{**classic, "endpoint": endpoint})
engine = None if base_url else spec
plan = dict(param=param.name, values=values, workload=workload, engine=engine)
plan.update(base_config=baseline, repeats=repeats.count, auto=repeats.auto, name=name)
plan.update(base_url=base_url or None)
plan.update(model=model or None, author=settings.resolved_author(), workload_spec=traffic)
plan.update(host=settings.resolved_host())
reuse = None if errors or not values else render_reuse_offer(db_path(), plan, settings.team_folder)
many_ok = confirm_many_runs(len(values), repeats)  # over the cap: a tick first
if st.button(
    "Start experiment",
    type="primary",
    disabled=busy or bool(errors) or not values or not many_ok,
    key="new_start",
):
    try:
        if engine is not None and learned:  # vLLM's own parser has the last word on its flags
            with st.spinner(CHECKING):
                prepare(db_path(), engine, param.name, values_text, baseline)
        exp_id = plan_experiment(db_path(), **plan)
        declare_primaries(db_path(), exp_id, primaries)
    except (ParamError, CatalogError) as exc:
        slot = values_slot if str(exc).startswith(param.name + ":") else baseline_slot
        slot.error(md_escape(exc))
        st.error("Nothing started: the refusal is shown above, next to its field.")
    except ValueError as exc:
        st.error(f"refused: {md_escape(exc)}")
    else:
        attach_fleet(db_path(), exp_id, fleet_options if on_fleet and not base_url else None)
        take_offer(db_path(), exp_id, reuse)
        spawn_runner(db_path(), exp_id)
        st.success(
            f"Experiment {exp_id} started in its own process; closing this tab stops nothing."
        )
        st.page_link("pages/3_Live.py", label="Watch it live", icon=ICONS["live"])
