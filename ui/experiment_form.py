"""Parts of New experiment's form that say how much to run: a fixed number of repeats or "until
decided" with its limits (the CLI's `experiment --repeats auto --max-repeats N --budget-minutes M`,
tuning.experiment.repeats), the experiment's name, a warning for a single value, and a tick asked
before Start when the values ask for more runs than the lab starts unasked (the CLI's `--yes`,
tuning.experiment.size)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import streamlit as st

from tuning.engine.params import format_value
from tuning.experiment.repeats import DEFAULT_MAX_REPEATS, AutoRepeats
from tuning.experiment.size import MAX_RUNS_UNASKED, experiment_runs, needs_yes
from ui.common import md_escape

FIXED, AUTO = "fixed", "auto"
REPEAT_MODES = {FIXED: "a fixed number", AUTO: "until decided"}
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
    own first rounds)."""

    count: int
    auto: AutoRepeats | None

    @property
    def first_rounds(self) -> int:
        return self.auto.first_rounds if self.auto else self.count


def render_repeats() -> Repeats:
    """The repeat choice and its numbers; until decided needs a most-runs limit, the budget is
    optional (0: none)."""
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
        count = c2.number_input("Runs per value (interleaved A B B A)", 1, 20, 1, key="new_repeats")
        return Repeats(int(count), None)
    least = AutoRepeats().first_rounds
    most = c2.number_input(
        "At most, runs a value", least, MOST_REPEATS, DEFAULT_MAX_REPEATS, key="new_max_repeats"
    )
    budget = c3.number_input(
        "Time budget, minutes (0: none)",
        0.0,
        7 * 24 * 60.0,
        0.0,
        step=5.0,
        key="new_budget_minutes",
        help="A round is added only when the estimate says it fits in what is left.",
    )
    auto = AutoRepeats(max_repeats=int(most), budget_minutes=float(budget) or None)
    return Repeats(auto.first_rounds, auto)


def render_name(param: str, values: Sequence[Any]) -> str | None:
    """The experiment's name; empty: the lab names it after the parameter and its values."""
    default = f"{param} = {', '.join(format_value(v) for v in values)}"
    name = st.text_input(
        "Name (optional)",
        key="new_name",
        max_chars=MAX_NAME_CHARS,
        placeholder=default,
        help="Shown on Live, Compare and History; empty: named after the parameter and values.",
    )
    return name.strip() or None


def warn_single_value(param: str, values: Sequence[Any]) -> None:
    """One value has nothing to be compared with: say so before anything starts."""
    if len(values) == 1:
        st.warning(
            f"Only one value of {md_escape(param)}: its runs are measured but nothing is compared "
            "with them. Add the value to compare against (the baseline first)."
        )


def confirm_many_runs(values: int, repeats: Repeats) -> bool:
    """Whether Start may start: yes, unless the values ask for more runs than the lab starts
    unasked, then only once the user ticks the box that says how many."""
    most = experiment_runs(
        values, repeats.count, repeats.auto.max_repeats if repeats.auto else None
    )
    if not needs_yes(most):
        return True
    return st.checkbox(
        f"Yes, start up to {most:,} runs ({values:,} values): more than the "
        f"{MAX_RUNS_UNASKED} the lab starts without asking",
        value=False,
        key="new_many_runs",
        help="Each run restarts the server for its value; a long list takes hours or days.",
    )
