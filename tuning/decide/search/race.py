"""The race that ends a search: repeats for the contenders near the top, until the leader's
interval clears the rest, they tie, or the budget of runs is spent (best-arm identification by
successive elimination). A pure function of the values' stored runs, so a stopped search
resumes its race from the store alone, and `search show` replays the same looks.

- **Budget.** The budget counts runs. Exploring (the coarse pass and bisection,
  tuning.decide.search.strategy) may spend at most half of it (`explore_budget`, at least the
  coarse pass); every run it leaves goes to the race.
- **Entry.** The values that measured something enter by their one run (those whose run was under
  the SLOs first, then by objective): the top `entry_size` (as many as can each reach 5 runs, a
  quarter of the race's runs, at least 2). A run over the SLO orders the entry; it rules nothing
  out (one run has no interval), and a value never raced stays "tried once", never a rival beaten.
- **Looks.** Every contender runs to the same number of runs, counterbalanced (each round in the
  opposite order of the last), and the race looks at 2, 3, 5, 8 and 10 runs a side (RACE_MAX;
  tuning.compare.sequential.Design's schedule). Each look spends alpha / L of the race's alpha
  (L looks, a union bound: repeated looks cannot inflate the false-choice rate); when the budget
  ends between two looks, one last look at the runs reached spends what the skipped looks would
  have (Design.final_confidence).
- **At a look.** Each contender's SLOs are judged on their interval (tuning.decide.search.slo);
  one that fails them is dropped. The leader is the best mean among those that meet them (else
  among those undecided). Every other contender is compared with the leader by the verdicts' rule
  (tuning.compare.stats.bootstrap_change), the look's alpha split over the rivals by Holm's
  step-down: at r rivals left each is read at 1 - alpha / r; the decided ones leave the family
  and the rest are read again at the next r. When the leader meets the SLOs, a rival decided worse
  is dropped (a clear loser; it gets no more runs). A run that measured nothing usable (its
  requests failed, the engine died, it did not start) drops its value: a value that fails under
  load is no choice.
- **Stop.** One contender left that meets the SLOs; or every one left meets them and is
  equivalent to the leader (within the margin: a tie); or RACE_MAX runs a side; or the budget.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuning.compare.catalog import Direction
from tuning.compare.sequential import Design
from tuning.compare.stats import DECIDED, Change, bootstrap_change
from tuning.decide.search.slo import FAILED, SloState, slo_state
from tuning.engine.value_text import format_value

RACE_MAX = 10  # runs of one value in the race at most
DESIGN = Design(max_repeats=RACE_MAX)  # looks at 2, 3, 5, 8, 10 runs a side; alpha 0.05


def race_design(race_runs: int, entrants: int) -> Design:
    """The race's looks: 2, 3, 5, 8, 10 runs a side, cut at the most one value can reach within
    the race's runs (every other entrant takes at least one run for the first look). Fixed by
    the budget before any race run, so the union bound holds; fewer looks spend alpha on fewer
    shares (one look at 2 runs a side reads at 95 %, not 99 %)."""
    reach = 1 + race_runs - max(0, entrants - 1)
    return Design(max_repeats=max(DESIGN.min_repeats, min(RACE_MAX, reach)))


@dataclass(frozen=True)
class ValueRuns:
    """What the stored steps measured of one value: the objective of each measured run in run
    order, each SLO's p99 of the same runs, the first run's SLO facts (entry order only), and
    how many measured runs came before the first run that measured nothing usable (None: none
    failed; 0: its first run failed)."""

    value: float
    objective: tuple[float, ...] = ()
    slo: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    started: bool = True
    failed_after: int | None = None
    first_under_slo: bool | None = None

    @property
    def n(self) -> int:
        return len(self.objective)

    def slo_first(self, n: int) -> dict[str, tuple[float, ...]]:
        return {name: values[:n] for name, values in self.slo.items()}

    def doomed(self, n: int) -> bool:
        """A run failed before this value reached `n` runs: it leaves the race at that look."""
        return self.failed_after is not None and self.failed_after < n


@dataclass(frozen=True)
class Rival:
    """One rival at a look: its change against the leader and the confidence it was read at."""

    change: Change
    confidence: float


@dataclass(frozen=True)
class Look:
    """One look of the race: runs a side, its confidence, the contenders (before its drops), the
    leader, each contender's SLO state, each rival against the leader, and what was dropped."""

    runs: int
    confidence: float
    final: bool
    contenders: tuple[float, ...]
    leader: float | None
    slo: dict[float, SloState]
    rivals: dict[float, Rival]
    dropped: dict[float, str]
    means: dict[float, float]

    @property
    def left(self) -> tuple[float, ...]:
        return tuple(v for v in self.contenders if v not in self.dropped)

    def to_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs,
            "confidence": self.confidence,
            "final": self.final,
            "contenders": list(self.contenders),
            "leader": self.leader,
            "dropped": [{"value": v, "why": why} for v, why in self.dropped.items()],
        }


@dataclass(frozen=True)
class Race:
    """Where the race stands: who entered, the looks taken, who is left, and the runs to do next
    (in order; empty when it has stopped, with the reason in `why`)."""

    candidates: tuple[float, ...]
    entrants: tuple[float, ...]
    looks: tuple[Look, ...]
    left: tuple[float, ...]
    next: tuple[float, ...]
    why: str
    design: Design = DESIGN

    @property
    def stopped(self) -> bool:
        return not self.next


def explore_budget(budget_runs: int, coarse_points: int) -> int:
    """Runs the coarse pass and bisection may spend: half the budget, at least the coarse pass."""
    return min(budget_runs, max(coarse_points, math.ceil(budget_runs / 2)))


def entry_size(race_runs: int, candidates: int) -> int:
    """How many values enter the race: as many as can each reach 5 runs (its third look: 4 more
    runs each, a quarter of its runs), at least 2; no more than it can give a second run or there
    are values. At 2 runs a side nothing but a huge gap decides, so more entrants would spend the
    race on runs that cannot drop anyone (simulated: benchmarks/search_race_alpha.py)."""
    if race_runs <= 0:
        return 0
    return min(max(2, race_runs // 4), race_runs, candidates)


def budget_for_decision(coarse_points: int) -> int:
    """The smallest budget whose race can give two values 2 runs each."""
    budget = 2
    while budget - explore_budget(budget, coarse_points) < 2:
        budget += 1
    return budget


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def holm_rivals(
    leader: Sequence[float],
    rivals: Mapping[float, Sequence[float]],
    better: Direction,
    alpha: float,
) -> dict[float, Rival]:
    """Each rival against the leader (the rival as the candidate), the family's alpha split by
    Holm's step-down over the rivals: with r undecided, each is read at 1 - alpha / r; the
    decided leave, the rest are read again, until none decides."""
    out: dict[float, Rival] = {}
    remaining = list(rivals)
    while remaining:
        confidence = 1.0 - alpha / len(remaining)
        for value in remaining:
            change = bootstrap_change(leader, rivals[value], better, confidence=confidence)
            out[value] = Rival(change, confidence)
        decided = [v for v in remaining if out[v].change.verdict in DECIDED]
        if not decided:
            break
        remaining = [v for v in remaining if v not in decided]
    return out


def _slo_why(state: SloState) -> str:
    failed = [c for c in state.checks if c.state == FAILED]
    return "; ".join(
        f"p99 {c.name.upper()} {c.low:.3g} … {c.high:.3g} ms over {c.limit:g} ms" for c in failed
    )


def judge_look(
    members: Sequence[ValueRuns],
    n: int,
    confidence: float,
    better: Direction,
    slo_ms: Mapping[str, float],
    final: bool = False,
) -> Look:
    """One look at `n` runs a side (each member's first n measured runs)."""
    sign = 1.0 if better == "higher" else -1.0
    dropped: dict[float, str] = {}
    for m in members:
        if m.doomed(n):
            dropped[m.value] = "a run measured nothing usable (requests failed or no start)"
    alive = [m for m in members if m.value not in dropped]
    slo = {m.value: slo_state(m.slo_first(n), slo_ms, confidence) for m in alive}
    for m in alive:
        if slo[m.value].state == FAILED:
            dropped[m.value] = f"fails the SLOs ({_slo_why(slo[m.value])})"
    alive = [m for m in alive if m.value not in dropped]
    means = {m.value: _mean(m.objective[:n]) for m in alive}
    contenders = tuple(m.value for m in members)
    if not alive:
        return Look(n, confidence, final, contenders, None, slo, {}, dropped, means)
    pool = [m for m in alive if slo[m.value].feasible] or alive
    leader = max(pool, key=lambda m: (sign * means[m.value], -m.value))
    rivals = holm_rivals(
        leader.objective[:n],
        {m.value: m.objective[:n] for m in alive if m is not leader},
        better,
        1.0 - confidence,
    )
    if slo[leader.value].feasible:
        for value, rival in rivals.items():
            if rival.change.verdict == "worse":
                dropped[value] = (
                    f"worse than {format_value(leader.value)} at {n} runs a side "
                    f"({rival.confidence * 100:.4g} % interval, Holm)"
                )
    return Look(n, confidence, final, contenders, leader.value, slo, rivals, dropped, means)


def _settled(look: Look) -> str | None:
    """Why the race can stop after this look, or None."""
    left = look.left
    if not left:
        return "no contender is left"
    leader = look.leader
    assert leader is not None
    if not look.slo[leader].feasible:
        return None
    if left == (leader,):
        return f"{format_value(leader)} is the only contender left"
    others = [v for v in left if v != leader]
    if all(look.slo[v].feasible and look.rivals[v].change.verdict == "equivalent" for v in others):
        return "every contender left is equivalent to the leader (within the margin)"
    return None


def _entry_key(sign: float) -> Any:
    def key(v: ValueRuns) -> tuple[bool, float, float]:
        return (v.first_under_slo is False, -sign * v.objective[0], v.value)

    return key


def _runs_to(members: Sequence[ValueRuns], target: int, parity: int) -> list[float]:
    """The runs that bring every member to `target`, round by round, each round in the other
    order than the one before (a drift of the machine hits every value alike)."""
    out: list[float] = []
    counts = {m.value: m.n for m in members}
    for k in range(min(counts.values()) + 1, target + 1):
        order = list(members) if (k + parity) % 2 == 0 else list(reversed(members))
        for m in order:
            if counts[m.value] < k:
                out.append(m.value)
                counts[m.value] += 1
    return out


def plan_race(
    values: Sequence[ValueRuns],
    better: Direction,
    slo_ms: Mapping[str, float],
    *,
    race_runs: int,
    budget_left: int,
    design: Design | None = None,
) -> Race:
    """The race so far, replayed from the stored runs, and the runs to do next (see the module
    docstring). `race_runs`: the runs the budget leaves after exploring (sets the entry size);
    `budget_left`: the runs not spent yet."""
    sign = 1.0 if better == "higher" else -1.0
    usable = [v for v in values if v.started and v.n >= 1 and v.failed_after != 0]
    order = sorted(usable, key=_entry_key(sign))
    entrants = order[: entry_size(race_runs, len(order))]
    candidates = tuple(v.value for v in order)
    names = tuple(v.value for v in entrants)
    if not entrants:
        why = "no value gave a usable result" if not usable else "the budget leaves no run to race"
        return Race(candidates, names, (), (), (), why)
    design = design or race_design(race_runs, len(entrants))
    members = list(entrants)
    looks: list[Look] = []
    schedule = design.looks()
    for n in schedule:
        live = [m for m in members if not m.doomed(n)]
        if any(m.n < n for m in live):
            break
        look = judge_look(members, n, design.look_confidence(), better, slo_ms)
        looks.append(look)
        members = [m for m in members if m.value in look.left]
        settled = _settled(look)
        if settled is not None:
            return Race(candidates, names, tuple(looks), look.left, (), settled, design)
    last = looks[-1].runs if looks else 1

    def stop(why: str) -> Race:
        """Stopped between looks: a value whose run failed since the last look is out."""
        left = tuple(m.value for m in members if not m.doomed(last + 1))
        return Race(candidates, names, tuple(looks), left, (), why, design)

    if last >= schedule[-1]:
        return stop(f"{last} runs a side: the most the race gives a value")
    target = next(n for n in schedule if n > last)
    live = [m for m in members if not m.doomed(target)]

    def cost(k: int) -> int:
        return sum(max(0, k - m.n) for m in live)

    def going(todo: list[float], why: str) -> Race:
        left = tuple(m.value for m in members)
        return Race(candidates, names, tuple(looks), left, tuple(todo), why, design)

    parity = len(looks)
    if live and cost(target) <= budget_left:
        why = f"race: {len(live)} contender(s) to {target} runs each for the next look"
        return going(_runs_to(live, target, parity), why)
    reach = [k for k in range(last + 1, target) if cost(k) <= budget_left]
    if not live or not reach:
        return stop("the budget of runs is spent")
    k = max(reach)
    if cost(k) > 0:
        return going(_runs_to(live, k, parity), f"race: the budget affords a last look at {k} runs")
    look = judge_look(members, k, design.final_confidence(k), better, slo_ms, final=True)
    looks.append(look)
    return Race(
        candidates, names, tuple(looks), look.left, (), "the budget of runs is spent", design
    )


def budget_text(budget_runs: int, coarse_points: int) -> str:
    """What the budget buys, said before the search starts: how much explores, what the race
    gets and costs, and when the budget is too small to decide anything."""
    explore = explore_budget(budget_runs, coarse_points)
    race = budget_runs - explore
    head = (
        f"budget {budget_runs} runs: up to {explore} explore the range (a coarse pass of "
        f"{coarse_points}, then bisection), "
    )
    if race < 2:
        need = budget_for_decision(coarse_points)
        return head + (
            f"{race} run(s) or more race the contenders: too few to give two values 2 runs "
            f"each, so this search can end undecided at best (--budget-runs {need} or more can "
            "decide)"
        )
    k = entry_size(race, race)
    looks = ", ".join(str(n) for n in DESIGN.looks()[1:])
    return head + (
        f"the other {race} or more race the top {k} values by their first run ({k} runs give "
        f"each a second for the first look at 2 runs a side; then looks at {looks} while "
        "undecided and the budget lasts)"
    )
