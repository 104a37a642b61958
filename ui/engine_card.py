"""The engine, drawn in words: Settings' "Check engine" card and Home's engine line (never raw
JSON), from what tuning.engine.doctor and tuning.engine.find report."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import streamlit as st

from ui.common import ICONS, md_code, md_escape

if TYPE_CHECKING:  # Home imports this module: it needs neither the doctor nor the finder
    from tuning.engine.doctor import Diagnosis
    from tuning.engine.find import Discovery
    from tuning.settings import Settings


def draw_check(findings: Sequence[Diagnosis], discovery: Discovery, engine: str) -> None:
    """One line per check (engine, model, GPU), a fix under each problem, then what else was
    found on this machine when it is not the engine in use."""
    with st.container(border=True, key="engine_card"):
        problems = [f for f in findings if not f.ok]
        head = f"{len(problems)} problem(s)" if problems else "ready"
        st.markdown(f"**Engine check: {head}**")
        for f in findings:
            icon = ICONS["ok"] if f.ok else ICONS["warning"]
            st.markdown(f"{icon} **{md_escape(f.check)}**: {md_escape(f.detail)}")
            if f.fix:
                st.caption(f"fix: {md_escape(f.fix)}")
        found = discovery.found
        if found is not None and (engine != "custom" or found.source != "settings"):
            st.caption(
                f"found on this machine ({md_escape(found.source)}): vLLM "
                f"{md_escape(found.version)} at {md_code(shlex.join(found.command))}: choose "
                "custom and put that command above to use it"
            )


def engine_line(info: dict[str, Any]) -> str:
    """Home's engine in use: name, vLLM version, model and served name, backend."""
    return (
        f"**{md_escape(info['engine'])}** · vLLM {md_escape(info['vllm_version'])} · model "
        f"{md_code(info['model_path'])} served as {md_code(info['served_model_name'])} · backend "
        f"{md_code(info['backend'])}"
    )


@st.cache_data(show_spinner=False, max_entries=8, ttl=30)
def _problem(engine: str, command: str, model: str) -> str:
    from tuning.engine.find import engine_problem
    from tuning.settings import Settings

    return engine_problem(Settings(engine=engine, engine_command=command, engine_model=model))


def engine_problem_line(settings: Settings) -> str:
    """Why the configured custom engine cannot run (tuning.engine.find.engine_problem: no vLLM
    in its interpreter, a program that is not there), or "": asked once per 30 s per engine, so
    Home and New experiment flag settings edited by hand without asking on every render."""
    if settings.engine != "custom":
        return ""
    return _problem(settings.engine, settings.engine_command, settings.engine_model)


def render_engine_problem(settings: Settings, what: str) -> bool:
    """The broken engine in one line with the way to Settings; True when there is one (`what`
    says what is off: Start, the demo)."""
    problem = engine_problem_line(settings)
    if problem:
        st.error(
            f"Your engine cannot start, so {what} is off: {md_escape(problem)}",
            icon=ICONS["warning"],
        )
        st.page_link("app_pages/6_Settings.py", label="Fix it on Settings", icon=ICONS["settings"])
    return bool(problem)
