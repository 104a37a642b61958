"""How many runs a request asks for, and the cap above which it needs the user's yes.

A pasted list of 10,000 values is 10,000 engine restarts (days of a GPU box): the CLI refuses a
request over `MAX_RUNS_UNASKED` runs unless `--yes` is given, and New experiment asks for a tick
before its Start button turns on. The count is the most the request may run: values x repeats,
values x the most repeats a value for repeat-until-decided, the budget of each search of a plan
and its confirmation rounds. Nothing here reads the store, so the refusal comes before any work;
the default limits of an experiment that repeats until decided are here for the same reason.
"""

from __future__ import annotations

MAX_RUNS_UNASKED = 64
# Repeat until decided (tuning.experiment.repeats), unless told otherwise: at most this many runs a
# value, and a round added only while the estimate says it fits in this many minutes (the CLI's
# default and New experiment's).
DEFAULT_MAX_REPEATS = 10
DEFAULT_BUDGET_MINUTES = 60.0


def experiment_runs(values: int, repeats: int, max_repeats: int | None = None) -> int:
    """The most runs an experiment may take: each value `repeats` times, or up to
    `max_repeats` times when it repeats until decided."""
    return values * (max_repeats if max_repeats is not None else repeats)


def plan_runs(params: int, budget_runs: int, confirm_repeats: int) -> int:
    """The most runs of a plan: a search of `budget_runs` per parameter, then start vs
    recommended, `confirm_repeats` runs a side."""
    return params * budget_runs + 2 * confirm_repeats


def needs_yes(runs: int) -> bool:
    return runs > MAX_RUNS_UNASKED


def over_cap(runs: int, what: str) -> str:
    """The words for a request over the cap: what asked for how many runs."""
    return (
        f"{what} asks for up to {runs:,} runs, over the {MAX_RUNS_UNASKED} the lab starts "
        "without asking"
    )
