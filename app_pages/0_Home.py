"""Home: what the lab is doing now, the active experiment, and where to start."""

from __future__ import annotations

import streamlit as st

from store import queries
from tuning.compare.present import fmt
from tuning.decide.background import search_running
from tuning.decide.reaper import reap_dead
from tuning.decide.search.names import shown_names
from tuning.engine.current import current_spec, engine_info
from tuning.engine.embedded import venv_python
from tuning.engine.spec import EngineError
from tuning.experiment import demo
from tuning.experiment.supervisor import spawn_runner
from tuning.settings import load_settings
from ui.common import ICONS, db, lab_db_path, md_code, md_escape
from ui.decision import render_latest_decision
from ui.engine_card import engine_line, render_engine_problem
from ui.holder import render_holder
from ui.words import or_dash, phase_words

st.set_page_config(page_title="vLLM Tuning Lab", page_icon=ICONS["lab"], layout="wide")
st.title("vLLM Tuning Lab")
st.caption(
    "Change one vLLM flag at a time, restart, replay the same workload at the same "
    "concurrency, and compare memory, latency and throughput against the baseline."
)


def start_demo() -> None:
    """Plan the demo experiment (tuning.experiment.demo) and start its runner process."""
    settings = load_settings()
    exp_id = demo.plan_demo(
        lab_db_path(),
        current_spec(settings),
        author=settings.resolved_author(),
        host=settings.resolved_host(),
    )
    spawn_runner(lab_db_path(), exp_id)


reap_dead(lab_db_path())  # a killed runner's experiment reads failed, not running
conn = db()
settings = load_settings()
custom = settings.engine == "custom"  # the user's own vLLM: no CPU demo, no `make setup` advice
active = queries.active_experiments(conn)
held = render_holder(lab_db_path())  # the same line as Live and New experiment: what runs, where
if active:
    shown = shown_names(conn, active)  # a search's step by its search's id, not its key
    for exp in active:
        with st.container(border=True, key=f"active-{exp['id']}"):
            name = md_escape(shown[int(exp["id"])])
            st.subheader(f"Running now: experiment {exp['id']} — {name}")
            total = max(int(exp["runs_total"] or 1), 1)
            done = int(exp["runs_done"] or 0)
            st.progress(
                done / total,
                text=f"values done {done} of {total} · {md_escape(phase_words(exp['phase']))}",
            )
            st.page_link("app_pages/3_Live.py", label="Watch it live", icon=ICONS["live"])
elif search_running(lab_db_path()):  # between a search's steps no experiment is active
    st.info("A search is running (one at a time per machine): its progress is on New experiment.")
    st.page_link("app_pages/1_New_experiment.py", label="See the search", icon=ICONS["new"])
elif held:  # another lab's experiment holds the machine (no demo button: it could not start)
    st.caption("Its runs are stored in that lab; nothing else starts here until it ends.")
elif custom:
    st.info("No experiment is running. Start one from **New experiment**.")
elif not venv_python().is_file():  # no demo button above "NOT installed": it could not start
    st.info(
        "No experiment is running. The demo needs the embedded CPU engine, which is not "
        "installed (see Engine below); or start your own from **New experiment**."
    )
else:
    st.info(
        "No experiment is running. New here? The demo runs a real experiment on the embedded "
        "CPU engine (max-num-seqs 2 vs 16, a short workload, repeated until the verdict is "
        "decided; most of its time is the engine's starts), shows it live, then on Compare. "
        "Or start your own from **New experiment**."
    )
    if st.button(demo.BUTTON, icon=":material/play_arrow:", key="demo"):
        start_demo()
        st.switch_page("app_pages/3_Live.py")

render_latest_decision(conn)  # what the newest experiment decided, from its stored record
left, right = st.columns(2)
with left:
    st.subheader("Where to start")
    for page, label, icon in (
        (
            "app_pages/1_New_experiment.py",
            "New experiment: pick one parameter and its values",
            "new",
        ),
        ("app_pages/2_Runs.py", "Runs: every run with its key numbers", "runs"),
        ("app_pages/3_Live.py", "Live: memory, KV cache and tokens as they happen", "live"),
        ("app_pages/4_Compare.py", "Compare: baseline vs candidates, with verdicts", "compare"),
        ("app_pages/5_History.py", "History: filter, tag, hide, share", "history"),
        (
            "app_pages/7_Searches.py",
            "Searches: the chosen value, its SLO and why each step ran",
            "search",
        ),
        ("app_pages/6_Settings.py", "Settings: engine, author, team folder", "settings"),
    ):
        st.page_link(page, label=label, icon=ICONS[icon])
with right:
    st.subheader("Engine")
    try:
        info: dict[str, object] | None = engine_info(settings)
    except EngineError as exc:  # a custom engine without its command or model
        info = None
        st.warning(f"Your engine is incomplete: {md_escape(exc)}", icon=ICONS["warning"])
    if info is not None:
        st.markdown(engine_line(info))
    if info is not None and not info["installed"]:
        if custom:
            st.warning(
                f"Your vLLM was not found: {md_code(settings.engine_command)} does not exist.",
                icon=ICONS["warning"],
            )
        else:
            st.warning("The embedded engine is NOT installed: run `make setup`.")
    if custom and (info is None or not info["installed"]):
        st.page_link("app_pages/6_Settings.py", label="Fix it on Settings", icon=ICONS["settings"])
    elif custom:  # there, but perhaps without vLLM (settings edited by hand): Start is off
        render_engine_problem(settings, "Start on New experiment")
    runs = queries.list_runs(conn, limit=5)
    st.subheader("Latest runs")
    if runs:
        for r in runs:
            st.markdown(
                f"- run {r['id']} · {md_escape(or_dash(r['param']))} = "
                f"{md_escape(or_dash(r['value']))} · "
                f"{md_escape(r['status'])} · {fmt(r.get('output_throughput'), 'tok/s')}"
            )
    else:
        st.caption("none yet")
