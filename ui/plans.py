"""The Searches page's Plans section (issue 23 item 5, "a plan likewise"): a tuning plan as a
result of its own. For the chosen plan: its parameters in order and each search's chosen value
(a link to that search), the recommended configuration against the start, the gain with its
interval and verdict (green / red only when decided, else the neutral grey), and the `vllm serve`
command. Everything shown comes from tuning.decide.search.plan_show (the same facts `plan show ID`
prints). Widget keys start with `plans_`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from tuning.compare.present import TONE_MARK, fmt
from tuning.decide.search.plan_show import gain_line, label, plan_facts, plan_rows, step_line
from tuning.decide.search.show import slo_words
from tuning.engine.params import show_value
from ui.common import ICONS, md_code, md_escape, pick_by_query
from ui.links import compare_link
from ui.words import metric_words

SEARCHES_PAGE = "app_pages/7_Searches.py"


def pick_plan(path: Path) -> dict[str, Any] | None:
    """The plan to show: ?plan=ID, else the newest; None (said why) when there is none."""
    rows = plan_rows(path)
    if not rows:
        st.caption(
            "No plan yet. A plan searches several parameters in order, each winner the next "
            "search's baseline, and measures the recommendation against the start: "
            + md_code("tuning-lab plan --params A,B --param-range A=LO:HI --param-range B=LO:HI")
        )
        return None
    return pick_by_query(rows, "plan", "Plan", "plans_pick", label)


def render_plans(path: Path) -> None:
    st.header("Plans", anchor="plans")
    row = pick_plan(path)
    if row is None:
        return
    f = plan_facts(row)
    render_plan_headline(f)
    st.subheader("Searches, in order")
    st.dataframe(plan_steps_frame(f), hide_index=True, key="plans_steps")
    for s in f["steps"]:
        if s.get("search_id"):
            st.page_link(
                SEARCHES_PAGE,
                label=f"Search {s['search_id']}: {s['param']}",
                icon=ICONS["search"],
                query_params={"search": str(s["search_id"])},
            )
    if f["config"]:
        st.subheader("Recommended vs start" if f["recommended"] else "Final vs start")
        st.dataframe(config_frame(f), hide_index=True, key="plans_config")
    if f["serve_command"]:  # only a decided recommendation (plan_show.verdict_of)
        st.code(f["serve_command"], language="bash")
    elif f["not_recommended"]:
        st.info(md_escape(f"Not recommended: {f['not_recommended']}"))
    render_evidence(f)


def gain_markdown(f: Mapping[str, Any], gain: Mapping[str, Any]) -> str:
    """A gain line in words, in its verdict's colour (grey unless decided better or worse)."""
    text = md_escape(gain_line(f, gain))
    mark = TONE_MARK[gain["tone"]]
    if gain["tone"] in ("better", "worse"):
        text = f"**{text}**"
    return f":{mark}[{text}]" if mark else text


def render_plan_headline(f: Mapping[str, Any]) -> None:
    """The decision first: the gain over the start with its interval and verdict."""
    st.subheader(md_escape(f"plan {f['plan_id']}: {', then '.join(f['params'])}"))
    if f["gain"]:
        st.markdown("Gain over the start, " + gain_markdown(f, f["gain"]))
        others = [f"- {gain_markdown(f, g)}" for g in f["gains"][1:]]
        if others:
            st.markdown("\n".join(others))
    else:
        st.markdown("Gain over the start: not measured yet.")
    st.caption(
        md_escape(
            f"objective: {metric_words(f['objective'])} "
            f"({f['unit']}, {f['better']} is better) · SLOs: "
            f"{slo_words(f['slo_ms'])} · {f['status']}"
        )
    )
    if f["error"]:
        st.warning(md_escape(f["error"]))


def plan_steps_frame(f: Mapping[str, Any]) -> pd.DataFrame:
    """One row per search: its parameter, the chosen value and what its objective measured."""
    return pd.DataFrame(
        [
            {
                "#": s["index"],
                "parameter": s["param"],
                "chosen": "—" if s.get("chosen") is None else show_value(s["param"], s["chosen"]),
                metric_words(f["objective"]): fmt(s.get("chosen_objective"), f["unit"]),
                "meets SLOs": s.get("meets_slo"),
                "search": s.get("search_id"),
                "in words": step_line(f, s),
            }
            for s in f["steps"]
        ]
    )


def config_frame(f: Mapping[str, Any]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "parameter": c["param"],
                "start": show_value(c["param"], c["start"]),  # 'unset' for None, bytes in GiB
                "recommended" if f["recommended"] else "final": show_value(
                    c["param"], c["recommended"]
                ),
                "changed": c["changed"],
            }
            for c in f["config"]
        ]
    )


def render_evidence(f: Mapping[str, Any]) -> None:
    """The runs behind the gain, and one click to compare them."""
    runs = f["confirm_runs"]
    start, final = runs.get("start") or [], runs.get("final") or []
    if not (start and final):
        return
    st.caption(
        md_escape(
            f"Behind the gain: runs {', '.join(map(str, start))} (start) vs "
            f"{', '.join(map(str, final))} (recommended), experiments "
            f"{', '.join(map(str, f['confirm_experiments']))}."
        )
    )
    compare_link("Compare start vs recommended runs", runs=[*start, *final])
