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
