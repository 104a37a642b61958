"""How often does a search's race choose a value where none is better, and how often does it find
one that is?

Simulates searches' races (tuning.decide.search.race.plan_race, driven one run at a time as
tuning.decide.search.driver drives it, each value explored once first) and their decisions
(tuning.decide.search.decision.decide), and prints per setting (values, budget, run-to-run CV):
- A/A: every value of one true throughput. The false-choice rate is the share that ended
  `chosen` (a value claimed better than its rivals): the race's alpha is 0.05 over its looks, with
  Holm over the rivals at each look, so this should stay under 5 %; the rest end in a tie (its
  tie-breaker named) or undecided. No choice may rest on one run: the largest share of decisions
  whose chosen value had fewer than 2 runs is printed too (it must be 0);
- one value 10 % better: how often the race chooses it (power), ties it, or chooses another.

    .venv/bin/python benchmarks/search_race_alpha.py [--sims 400] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tuning.decide.search.decision import decide  # noqa: E402
from tuning.decide.search.race import ValueRuns, plan_race  # noqa: E402

SETTINGS = [  # (values, budget runs, CV)
    (4, 8, 0.05),
    (4, 12, 0.05),
    (5, 16, 0.10),
    (6, 24, 0.15),
]


def race_once(rng: random.Random, means: list[float], budget: int, cv: float) -> dict[str, object]:
    """One search's race over values 0..n-1 of these true means; its decision."""
    runs: dict[float, list[float]] = {
        float(v): [m * rng.gauss(1.0, cv)] for v, m in enumerate(means)
    }
    used = len(means)
    while True:
        values = [ValueRuns(v, tuple(r)) for v, r in runs.items()]
        race = plan_race(
            values, "higher", {}, race_runs=budget - len(means), budget_left=budget - used
        )
        if not race.next:
            return decide(race, values, "higher", {})
        value = race.next[0]
        runs[value].append(means[int(value)] * rng.gauss(1.0, cv))
        used += 1


def upper95(k: int, n: int) -> float:
    """A one-sided 95 % upper bound of a rate seen k times in n (Wilson)."""
    z, p = 1.645, k / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre + spread) / (1 + z * z / n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sims", type=int, default=400)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    worst = 0.0
    print(f"{args.sims} simulated races per row; alpha 0.05")
    for n, budget, cv in SETTINGS:
        aa: Counter[str] = Counter()
        thin = 0
        for _ in range(args.sims):
            d = race_once(rng, [1000.0] * n, budget, cv)
            aa[str(d["outcome"])] += 1
            rows = {r["value"]: r for r in d["values"]}  # type: ignore[attr-defined]
            if d["chosen"] is not None and rows[d["chosen"]]["runs"] < 2:
                thin += 1
        best = n // 2
        power: Counter[str] = Counter()
        for _ in range(args.sims):
            means = [1100.0 if v == best else 1000.0 for v in range(n)]
            d = race_once(rng, means, budget, cv)
            hit = d["chosen"] == float(best)
            power[f"{d['outcome']}{' (right)' if hit else ''}"] += 1
        false = aa["chosen"]
        worst = max(worst, thin / args.sims)
        print(
            f"{n} values, budget {budget}, CV {cv:.0%}: A/A chosen {false / args.sims:.1%} "
            f"(95 % upper {upper95(false, args.sims):.1%}), tie {aa['tie'] / args.sims:.1%}, "
            f"undecided {aa['undecided'] / args.sims:.1%}; choices from one run {thin}; "
            f"10 % better: chosen right {power['chosen (right)'] / args.sims:.1%}, "
            f"tie {(power['tie'] + power['tie (right)']) / args.sims:.1%}, "
            f"chosen wrong {power['chosen'] / args.sims:.1%}"
        )
    print(f"largest share of choices resting on one run: {worst:.1%} (must be 0)")
    return 0 if worst == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
