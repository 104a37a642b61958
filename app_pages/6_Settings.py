"""The lab's settings: which vLLM to start (embedded CPU engine or your own), who you are."""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from tuning.decide.fleet import INSTALL_HINT, FleetError, options_from_settings, ray_available
from tuning.engine.doctor import engine_findings
from tuning.engine.find import custom_problem, engine_problem, find_vllm, served_name_for
from tuning.settings import load_settings, save_settings, settings_path
from ui.common import ICONS, md_code, md_escape
from ui.engine_card import draw_check
from ui.terminal_token import approve, guarded_changes

st.set_page_config(
    page_title="Settings · vLLM Tuning Lab", page_icon=ICONS["settings"], layout="wide"
)
st.title("Settings")
st.caption(
    f"Saved in {md_code(settings_path())}; environment variables `TUNING_LAB_<NAME>` override them."
)
s = load_settings()
engine = st.radio(
    "Engine",
    ["embedded", "custom"],
    index=0 if s.engine == "embedded" else 1,
    key="set_engine",
    horizontal=True,
    help="embedded = the CPU build of vLLM with a tiny dummy model (built by "
    "`make setup`); custom = your own vLLM, e.g. on a GPU box.",
)
command = st.text_input(
    "vLLM interpreter or command",
    s.engine_command,
    key="set_command",
    placeholder="/path/to/venv/bin/python  or  /path/to/bin/vllm serve",
    help="/path/to/venv/bin/python (runs -m vllm.entrypoints.openai."
    "api_server) or a command such as `/opt/vllm/bin/vllm serve` (`which vllm` says where).",
)
model = st.text_input(
    "Model path or ID",
    s.engine_model,
    key="set_model",
    help="a local folder or a hub id vLLM resolves; the lab downloads nothing",
)
c1, c2, c3 = st.columns(3)
backend = c1.selectbox(
    "Backend", ["gpu", "cpu"], index=0 if s.engine_backend != "cpu" else 1, key="set_backend"
)
load_format = c2.selectbox(
    "Load format",
    ["", "dummy", "auto"],
    index=["", "dummy", "auto"].index(s.engine_load_format)
    if s.engine_load_format in ("", "dummy", "auto")
    else 0,
    key="set_load_format",
    help="dummy = random weights, no download",
)
served = c3.text_input(
    "Served model name",
    s.served_model_name,
    key="set_served",
    placeholder=served_name_for(model) if model.strip() else "from the model",
    help="empty: the model's last path component",
)
author = st.text_input("Author (defaults to the OS user)", s.author, key="set_author")
team = st.text_input("Team folder (shared bundles)", s.team_folder, key="set_team")
st.subheader("Fleet")
st.caption(
    "Where New experiment's *run on the fleet* sends an experiment's runs: several at once, "
    "through Ray (see the README's Fleet section)."
)
modes = ["none", "local", "ray"]
fleet = st.radio(
    "Fleet",
    modes,
    index=modes.index(s.fleet) if s.fleet in modes else 0,
    key="set_fleet",
    horizontal=True,
    help="none = one run at a time; local = a Ray the lab starts on this machine with N slots; "
    "ray = an existing Ray cluster (nodes declare the `lab_slot` resource).",
)
f1, f2, f3 = st.columns(3)
slots = f1.text_input(
    "Slots",
    s.fleet_slots,
    key="set_fleet_slots",
    help="local: slots to start (empty: one per "
    "GPU set, two on a CPU machine); ray: at most this many in use (empty: all).",
)
address = f2.text_input(
    "Ray address",
    s.fleet_ray_address,
    key="set_fleet_address",
    help="ray: auto or HOST:PORT of the head",
)
gpus = f3.text_input(
    "GPUs per run",
    s.fleet_gpus_per_run,
    key="set_fleet_gpus",
    help="empty: the tensor-parallel size on GPU nodes, 0 on CPU nodes",
)
if fleet != "none" and not ray_available():
    st.warning(INSTALL_HINT)
form = replace(
    s,
    engine=engine,
    engine_command=command.strip(),
    engine_model=model.strip(),
    engine_backend=backend,
    engine_load_format=load_format,
    served_model_name=served.strip(),
    author=author.strip(),
    team_folder=team.strip(),
    fleet=fleet,
    fleet_slots=slots.strip(),
    fleet_ray_address=address.strip() or "auto",
    fleet_gpus_per_run=gpus.strip(),
)
token = ""
if guarded_changes(s, form):  # a program this machine will run: only the terminal may say so
    token = st.text_input(
        "Terminal token",
        key="set_token",
        type="password",
        help="printed by `make run` in its terminal when the app started",
    )
    st.caption(
        "A new engine command is a program this machine will run: Save and Check engine ask for "
        "the token `make run` printed in its terminal (or set `TUNING_LAB_ENGINE_COMMAND` there)."
    )
b1 = b2 = st.container(horizontal=True, key="set_buttons")  # buttons as wide as their words
if b1.button("Save settings", type="primary", key="set_save"):
    problem = custom_problem(form.engine_command, form.engine_model) if engine == "custom" else ""
    try:
        options_from_settings(form)
    except FleetError as exc:
        problem = problem or str(exc)
    problem = problem or approve("save", s, form, token)
    if not problem and engine == "custom":  # approved: only now may its interpreter run
        with st.spinner("asking the engine's interpreter for its vLLM..."):
            problem = engine_problem(form)
    if problem:
        st.error(f"not saved: {md_escape(problem)}")
    else:
        save_settings(form)
        st.success("saved")
if b2.button("Check engine", key="set_check", help="the engine as entered: vLLM, model, GPUs"):
    problem = approve("check", s, form, token)
    if problem:
        st.error(f"not checked: {md_escape(problem)}")
    else:
        with st.spinner("asking the engine's interpreter for its vLLM..."):
            draw_check(engine_findings(form), find_vllm(form), engine)
