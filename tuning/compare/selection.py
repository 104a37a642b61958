"""From what a user names (run ids, experiment ids, a baseline) to a Comparison: the one path the
CLI, the HTML report, the History page's sharing and the Compare page all take."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store import StoreError, queries
from tuning.compare.comparison import (
    Comparison,
    build_comparison,
    default_baseline,
    repeats_of,
    request_loader,
)
from tuning.compare.defaults import engine_default
from tuning.compare.prefer import Preference, prefer_default
from tuning.compare.stats import MARGIN


class SelectionError(ValueError):
    """Nothing to compare, or a run or experiment that does not exist; the message says which."""


@dataclass(frozen=True)
class Selection:
    runs: list[dict[str, Any]]  # every run named, in the order named
    experiments: list[dict[str, Any]]  # the experiments named
    comparison: Comparison
    preference: (
        Preference  # keep vLLM's default, set a value, or why neither (tuning.compare.prefer)
    )


def _unique(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(int(i) for i in ids))


def gather_runs(
    db: Any,
    *,
    run_ids: Iterable[int] = (),
    experiment_ids: Iterable[int] = (),
    first: Iterable[int] = (),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(runs, experiments): the runs named, then every run of the experiments named; ids in
    `first` lead when they are not among those."""
    ids = _unique(run_ids)
    experiments = []
    try:
        for eid in _unique(experiment_ids):
            experiments.append(queries.get_experiment(db, eid))
            ids += [i for i in queries.experiment_run_ids(db, eid) if i not in ids]
        ids = [*[i for i in _unique(first) if i not in ids], *ids]
        if not ids:
            raise SelectionError("no runs selected: name runs or an experiment that has runs")
        return queries.load_runs(db, ids), experiments
    except StoreError as exc:
        raise SelectionError(str(exc)) from None


def select_runs(
    db: Any,
    *,
    run_ids: Iterable[int] = (),
    experiment_ids: Iterable[int] = (),
    baseline_ids: Sequence[int] = (),
    with_repeats: bool = False,
    slo: Mapping[str, float] | None = None,
    margin: float = MARGIN,
    include_suspect: bool = False,
) -> Selection:
    """The named runs compared. The baseline side is `baseline_ids` (added to the selection when
    not named otherwise; with their repeats among the runs if `with_repeats`), by default the runs
    of the first value. `margin` is the equivalence margin E (a fraction; stats.MARGIN). Suspect
    runs are left out of the values unless `include_suspect`."""
    base = _unique(baseline_ids)
    runs, experiments = gather_runs(db, run_ids=run_ids, experiment_ids=experiment_ids, first=base)
    if with_repeats:
        base = _unique(i for b in base for i in repeats_of(runs, b))
    base = base or default_baseline(runs)
    comparison = build_comparison(
        runs,
        base,
        slo_ms=slo,
        requests=request_loader(db),
        margin=margin,
        include_suspect=include_suspect,
    )
    return Selection(runs, experiments, comparison, preference_of(db, comparison, runs))


def preference_of(db: Any, comparison: Comparison, runs: Sequence[Mapping[str, Any]]) -> Preference:
    """The recommendation for the comparison's parameter: its engine default read for `runs`."""
    param = comparison.param or ""
    return prefer_default(comparison, engine_default(db, param, runs))
