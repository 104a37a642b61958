"""The decision on the page: the headline box Compare opens with (one sentence per candidate over
the primary metrics, the rule that decided, then the recommendation with its `vllm serve` line,
the decision to keep, or what would decide it with a button that starts those runs), and Home's
latest decision. Everything is read from the report model / the stored decision record
(tuning.present.model, tuning.experiment.decision); nothing is judged here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import streamlit as st

from tuning.compare.decision import Decision, NextStep
from tuning.compare.headline import Headline
from tuning.decide.search.names import shown_names
from tuning.engine.params import show_value
from tuning.present.model import ReportModel
from ui.common import ICONS, md_escape
from ui.links import compare_link

MORE_RUNS_KEY = "cmp_more_runs"


def serve_line(exp: Mapping[str, Any] | None, value: Any) -> str | None:
    """`vllm serve MODEL --flag value ...` for the experiment's baseline with `value` set (None
    for an attached server, an imported row, or a value that is not a server flag)."""
    from tuning.decide.search.plan import serve_command
    from tuning.engine.params import ParamError
    from tuning.engine.spec import EngineSpec

    if not exp or not exp.get("engine") or not exp.get("param"):
        return None
    try:
        engine = EngineSpec(**exp["engine"])
        return serve_command(engine, {**(exp.get("config") or {}), exp["param"]: value})
    except (TypeError, ValueError, ParamError):
        return None


def start_more_runs(db_path: Path, experiment_id: int, step: NextStep) -> int:
    """Go on with the experiment under the step's limits (a fixed-repeats one goes on until
    decided) and start its runner; the runs it will add (0: nothing left to run)."""
    from tuning.experiment.supervisor import prepare_resume, raise_limits, spawn_runner

    raise_limits(db_path, experiment_id, step.max_repeats, step.budget_minutes)
    left = prepare_resume(db_path, experiment_id)
    if left:
        spawn_runner(db_path, experiment_id)
    return left


def _more_runs_button(model: ReportModel, db_path: Path) -> None:
    """The button that runs what would decide it, and the same as a command."""
    step, exp_id = model.decision.next_step, model.experiment_id
    if step is None or exp_id is None or step.max_repeats is None:
        return
    busy = any(e.get("status") in ("queued", "running") for e in model.experiments)
    label = f"Run {step.text()}"
    if st.button(label, key=MORE_RUNS_KEY, icon=":material/play_arrow:", disabled=busy):
        from tuning.experiment.supervisor import ResumeRefused

        try:
            left = start_more_runs(db_path, exp_id, step)
        except (ResumeRefused, ValueError) as exc:
            st.error(f"refused: {md_escape(exc)}")
        else:
            st.success(f"Experiment {exp_id} goes on: {left} more run(s) planned.")
            st.page_link("app_pages/3_Live.py", label="Watch it live", icon=ICONS["live"])
    if model.command:
        st.code(model.command, language="bash")


def render_closing(lead: Headline) -> None:
    """The headline's last line: recommended (green), keep (blue), not decided (amber), or why
    there is no recommendation (grey)."""
    if not lead.closing:
        return
    head, _, rest = lead.closing.partition(": ")
    text = f"**{md_escape(head)}:** {md_escape(rest)}"
    if lead.kind == "value":
        st.success(text)
    elif lead.kind in ("default", "keep"):
        st.info(text)
    elif lead.next_step:
        st.warning(text)
    else:
        st.caption(text)


def render_actions(lead: Headline, model: ReportModel, db_path: Path | None) -> None:
    """Under the headline box: the recommendation's `vllm serve` line, or the button (and command)
    that runs what would decide it. Outside the box, so the decision itself fits one screen."""
    if lead.kind == "value":
        exp = model.experiments[0] if len(model.experiments) == 1 else None
        rec = model.decision.recommended
        line = serve_line(exp, rec.value) if rec else None
        if line:
            st.code(line, language="bash")
    elif lead.next_step and db_path is not None:
        _more_runs_button(model, db_path)


def render_decision(model: ReportModel, db_path: Path | None = None) -> None:
    """The decision at a glance, the first thing under Compare's selectors."""
    lead = model.headline
    if not lead.lines:
        return
    with st.container(border=True, key="cmp_headline"):
        if lead.sentences:  # the rule that decided: on the sentences' help mark, one hover away
            sentences = "\n".join(f"- {md_escape(text)}" for text in lead.sentences)
            st.markdown(sentences, help=lead.rule)
        for note in lead.notes:  # the runs were served both ways (resident engines fell back)
            st.caption(md_escape(note))
        render_closing(lead)
    render_actions(lead, model, db_path)


def latest_text(exp: Mapping[str, Any], decision: Decision, shown: str | None = None) -> str:
    """'experiment 4 (stream-interval 1, 16): recommended 16' or its state in words; `shown`
    its name as a user reads it (tuning.decide.search.names), else the stored one."""
    name = f"experiment {exp['id']}: {shown or exp.get('name') or exp.get('param')}"
    rec = decision.recommended
    if not decision.decides:
        return f"{name}: no decision"
    if not decision.complete:
        return f"{name}: running, not decided yet"
    if rec is not None:
        return f"{name}: recommended {decision.param} = {show_value(decision.param, rec.value)}"
    if decision.undecided:
        step = decision.next_step
        return f"{name}: undecided" + (f" ({step.text()} would likely decide it)" if step else "")
    keep = show_value(decision.param, decision.baseline)
    return f"{name}: decided, no value to recommend (keep {decision.param} = {keep})"


def render_latest_decision(db: Any) -> None:
    """Home's latest decision: the newest experiment of two or more values, as its record says,
    with a link to Compare."""
    from tuning.experiment.decision import latest_decision

    found = latest_decision(db)
    st.subheader("Latest decision")
    if found is None:
        st.caption("none yet: an experiment of two or more values decides one")
        return
    exp, decision = found
    shown = shown_names(db, [dict(exp)])[int(exp["id"])]  # a search's step: its search's id
    with st.container(key="home_latest_decision"):
        st.markdown(md_escape(latest_text(exp, decision, shown)))
        compare_link("See it on Compare", experiment=int(exp["id"]))
