"""Set up an experiment: one flag of the user's vLLM (any it defines but the refused ones), its
values, the baseline and the workload."""

from __future__ import annotations

import streamlit as st

from store.snapshot import is_compressed, read_only_words
from tuning.decide.fleet import FleetError, attach_fleet, describe_options, options_from_settings
from tuning.decide.reaper import reap_dead
from tuning.engine.current import current_spec
from tuning.engine.flags.catalog import CatalogError
from tuning.engine.learn import needs_catalog
from tuning.engine.params import ParamError, format_value, show_value
from tuning.engine.validate import parse_assignments
from tuning.experiment.plan import plan_experiment
from tuning.experiment.primaries import declare as declare_primaries
from tuning.experiment.spec import ExperimentSpec
from tuning.experiment.supervisor import spawn_runner
from tuning.measure.traffic.workload import Workload
from tuning.settings import configured_db_path, load_settings
from ui.common import ICONS, lab_db_path, md_code, md_escape
from ui.engine_card import render_engine_problem
from ui.estimate import render_estimate
from ui.experiment_form import (
    confirm_many_runs,
    render_name,
    render_repeats,
    warn_cannot_decide,
)
from ui.flag_picker import CHECKING, engine_flags, render_picker
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

reap_dead(lab_db_path())  # what died holds nothing: the holder line and Start read the truth
settings = load_settings()
spec = current_spec(settings)
modes = {
    "values": "Run the values I choose",
    "search": "Search one parameter (the lab picks the values)",
}
mode = st.radio("Mode", list(modes), key="new_mode", horizontal=True, format_func=modes.get)
broken = render_engine_problem(settings, "Start")  # a custom engine without vLLM: nothing starts
if mode == "search":
    render_search_mode(lab_db_path(), spec, settings, engine_broken=broken)
    st.stop()
default_lines = "\n".join(f"{k}={format_value(v)}" for k, v in spec.baseline.items())
typed_baseline, _ = parse_assignments(
    str(st.session_state.get("new_baseline", default_lines)).splitlines(), "baseline line"
)
picked = render_picker(lab_db_path(), spec, typed_baseline)
if picked.param is None:
    st.stop()
param = picked.param

errors: list[str] = []
st.session_state.setdefault("new_values", "2,16")  # a new choice flag suggests its choices
values_text = st.text_input(
    "Values (comma-separated)",
    key="new_values",
    help="A JSON value keeps its own commas; text that holds a comma goes in double quotes: "
    '"AWS_,HF_",OTHER_ is two values. A flag of several values takes each value as a list in '
    "brackets: [1,2,4,8],[1,2,4,8,16,32] is two values.",
)
values_slot = st.container()  # what will run, or why not (filled once the spec is built)
name = render_name(param.name, values_text)

with st.expander("Baseline configuration", expanded=False):
    baseline_text = st.text_area(
        "NAME=VALUE, one per line: any flag of your vLLM (the engine's defaults otherwise)",
        value=default_lines,
        key="new_baseline",
        height=120,
    )
    typed, bad_lines = parse_assignments(baseline_text.splitlines(), "baseline line")
    errors += bad_lines
    catalog = picked.catalog  # read by the picker when the baseline needs it
    if catalog is None and needs_catalog(typed):  # the baseline was just edited
        catalog = engine_flags(lab_db_path(), spec, read=True).catalog
    if typed.get(param.name) is not None:
        st.caption(f"{param.name} in the baseline is replaced by each value.")
    baseline_slot = st.container()  # a refused baseline flag, here or on Start
prediction_slot = st.container()

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
    traffic, traffic_errors = traffic_section(lab_db_path(), classic, param.name)
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
resident = st.checkbox(
    "Switch resident servers between repeats",
    value=True,
    key="new_resident",
    disabled=not param.restarts_server or bool(base_url),
    help="Each value's server starts once and repeats switch them by vLLM's sleep mode instead of "
    "restarting (CUDA, a vLLM with sleep mode, a flag that does not size memory; a real "
    "restart every third round and a check that both give equivalent numbers). Where it cannot, "
    "the experiment says why once and restarts. Off: every run restarts its server.",
)


def say_refusal(message: str, label: str = "baseline: ") -> None:
    """A refusal next to its field: the values when it names the parameter, else the baseline."""
    if message.startswith(param.name + ":"):
        values_slot.error(md_escape(message))
    else:
        baseline_slot.error(md_escape(label + message))


draft: ExperimentSpec | None = None  # the experiment, built and checked once per render
try:
    draft = ExperimentSpec.build(
        param=param.name,
        values=values_text,
        workload=Workload(**{**classic, "endpoint": endpoint}),
        engine=None if base_url else spec,
        base_config=typed,
        repeats=repeats.count,
        auto=repeats.auto,
        base_url=base_url or None,
        model=model or None,
        name=name,
        author=settings.resolved_author(),
        host=settings.resolved_host(),
        workload_spec=traffic,
        catalog=catalog,
        resident="auto" if resident else "off",
    )
except (ParamError, CatalogError) as exc:
    errors.append(str(exc))
    say_refusal(str(exc))
except ValueError as exc:  # the workload's or the attached server's rule
    errors.append(str(exc))
    st.error(f"refused: {md_escape(exc)}")
for err in bad_lines:
    baseline_slot.error(md_escape(err))
if draft is not None:
    values_slot.caption(
        "will run: "
        + " · ".join(
            md_code(
                show_value(
                    draft.param.name, v, draft.engine.learned_params() if draft.engine else None
                )
            )
            for v in draft.values
        )
    )
    with values_slot:
        warn_cannot_decide(draft)
    if not errors and draft.param.source == "curated" and draft.engine is not None:
        with prediction_slot:
            render_prediction(draft)
    render_estimate(lab_db_path(), draft)
busy = render_holder(lab_db_path(), "One at a time per machine: Start is off until it ends.")
busy = busy or broken
if is_compressed(configured_db_path()):  # results would live only in the cached expansion
    busy = True
    st.error(md_escape(read_only_words(configured_db_path(), "TUNING_LAB_DB={plain}")))
ready = draft is not None and not errors
reuse = render_reuse_offer(lab_db_path(), draft, settings.team_folder) if ready and draft else None
many_ok = confirm_many_runs(draft) if draft else True  # over the cap: a tick first
if st.button(
    "Start experiment",
    type="primary",
    disabled=busy or not ready or not many_ok,
    key="new_start",
):
    try:
        if draft is None:  # Start is off without one
            raise ValueError("nothing to start")
        if draft.engine is not None and draft.engine.learned:  # vLLM's parser has the last word
            with st.spinner(CHECKING):
                draft.check_with_engine()
        exp_id = plan_experiment(lab_db_path(), draft)
        declare_primaries(lab_db_path(), exp_id, primaries)
    except (ParamError, CatalogError) as exc:  # vLLM's own parser: its words, as they are
        say_refusal(str(exc), label="")
        st.error("Nothing started: the refusal is shown above, next to its field.")
    except ValueError as exc:
        st.error(f"refused: {md_escape(exc)}")
    else:
        attach_fleet(lab_db_path(), exp_id, fleet_options if on_fleet and not base_url else None)
        take_offer(lab_db_path(), exp_id, reuse)
        spawn_runner(lab_db_path(), exp_id)
        st.success(
            f"Experiment {exp_id} started in its own process; closing this tab stops nothing."
        )
        st.page_link("app_pages/3_Live.py", label="Watch it live", icon=ICONS["live"])
