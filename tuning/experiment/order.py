"""The order an experiment's runs go in: counterbalanced rounds (A B | B A | A B ...), so a linear
drift of the machine (warming up, a neighbour's load growing) cancels between values instead of
always favouring the value that runs first in a round. One function, used by the runner, resume,
the fleet, repeats-until-decided and a plan's confirm runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def round_order(values: Sequence[T], round_index: int) -> list[T]:
    """The values of one round of a counterbalanced schedule: in order on even rounds, reversed
    on odd ones (A B | B A | A B ...), so a linear drift of the machine hits every value alike
    instead of always favouring the value that runs first in a round."""
    return list(values) if round_index % 2 == 0 else list(reversed(values))


def counterbalanced(values: Sequence[T], repeats: int, first_round: int = 0) -> list[tuple[T, int]]:
    """The run order of `repeats` rounds (value, round), counterbalanced (A B B A A B B A ...);
    `first_round` continues a schedule (the extra rounds of `--repeats auto`) with the right
    parity. The one place the order is decided: the runner, resume, the fleet, repeats-until-
    decided and a plan's confirm runs all take it from here."""
    rounds = range(first_round, first_round + max(1, repeats))
    return [(value, r) for r in rounds for value in round_order(values, r)]
