"""Parts of New experiment's form that say how much to run: "until decided" with its limits (the
default, as the CLI's `experiment` defaults to it: tuning.experiment.repeats) or a fixed number of
repeats, the experiment's name, a warning when it cannot end in a verdict (a single value, one run
a side), and a tick asked before Start when it may ask for more runs than the lab starts unasked
(the CLI's `--yes`, tuning.experiment.size)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from tuning.experiment.repeats import AutoRepeats
from tuning.experiment.size import (
    DEFAULT_BUDGET_MINUTES,
    DEFAULT_MAX_REPEATS,
    MAX_RUNS_UNASKED,
    needs_yes,
)
from tuning.experiment.spec import ExperimentSpec
from ui.common import md_escape

FIXED, AUTO = "fixed", "auto"
REPEAT_MODES = {AUTO: "until decided", FIXED: "a fixed number"}
MOST_REPEATS = 50  # a side; beyond this a difference too small to matter is being chased
MAX_NAME_CHARS = 200
AUTO_HELP = (
    "Starts with two interleaved rounds, then adds rounds only for the values still undecided "
    "against the baseline (the first value), until each is decided, reaches the most runs a "
    "side, or the time budget is spent."
)


@dataclass(frozen=True)
class Repeats:
    """What the form asks for: `count` rounds, or until decided (`auto`, which starts with its
    own first rounds; `count` is then 1, as the CLI's)."""

    count: int
    auto: AutoRepeats | None

    @property
    def first_rounds(self) -> int:
        return self.auto.first_rounds if self.auto else self.count


def render_repeats() -> Repeats:
    """The repeat choice and its numbers; until decided (the default) needs a most-runs limit and
    has a time budget (0: none)."""
    c1, c2, c3 = st.columns([2, 1, 1])
    mode = c1.radio(
        "Repeats per value",
        list(REPEAT_MODES),
        format_func=REPEAT_MODES.get,
        key="new_repeat_mode",
        horizontal=True,
        help=AUTO_HELP,
    )
    if mode != AUTO:
        count = c2.number_input("Runs per value (interleaved A B B A)", 1, 20, 2, key="new_repeats")
        return Repeats(int(count), None)
    least = AutoRepeats().first_rounds
    most = c2.number_input(
        "At most, runs a value", least, MOST_REPEATS, DEFAULT_MAX_REPEATS, key="new_max_repeats"
    )
    budget = c3.number_input(
        "Time budget, minutes (0: none)",
        0.0,
        7 * 24 * 60.0,
        DEFAULT_BUDGET_MINUTES,
        step=5.0,
        key="new_budget_minutes",
        help="A round is added only when the estimate says it fits in what is left.",
    )
    return Repeats(1, AutoRepeats(max_repeats=int(most), budget_minutes=float(budget) or None))


def render_name(param: str, values_text: str) -> str | None:
    """The experiment's name; empty: the lab names it after the parameter and its values."""
    name = st.text_input(
        "Name (optional)",
        key="new_name",
        max_chars=MAX_NAME_CHARS,
        placeholder=f"{param} = {values_text.strip()}",
        help="Shown on Live, Compare and History; empty: named after the parameter and values.",
    )
    return name.strip() or None


def warn_cannot_decide(spec: ExperimentSpec) -> None:
    """One value has nothing to be compared with, and one run a side decides nothing: say so
    before anything starts."""
    if len(spec.values) == 1:
        st.warning(
            f"Only one value of {md_escape(spec.param.name)}: its runs are measured but nothing "
            "is compared with them. Add the value to compare against (the baseline first)."
        )
    elif spec.warning:
        st.warning(md_escape(spec.warning[:1].upper() + spec.warning[1:]) + ".")


def confirm_many_runs(spec: ExperimentSpec) -> bool:
    """Whether Start may start: yes, unless it may ask for more runs than the lab starts
    unasked, then only once the user ticks the box that says how many."""
    most = spec.most_runs
    if not needs_yes(most):
        return True
    values = len(spec.values)
    return st.checkbox(
        f"Yes, start up to {most:,} runs ({values:,} values): more than the "
        f"{MAX_RUNS_UNASKED} the lab starts without asking",
        value=False,
        key="new_many_runs",
        help="Each run restarts the server for its value; a long list takes hours or days.",
    )
