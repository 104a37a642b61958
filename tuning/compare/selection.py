"""From what a user names (run ids, experiment ids, a baseline) to a Comparison: the one path the
CLI, the HTML report, the History page's sharing and the Compare page all take (through the
report model, tuning.present.model, which adds the decision record and its words). Runs already
loaded (the Compare page's) are used as they are: nothing is read twice."""

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
from tuning.compare.stats import MARGIN


class SelectionError(ValueError):
    """Nothing to compare, or a run or experiment that does not exist; the message says which."""


@dataclass(frozen=True)
class Selection:
    runs: list[dict[str, Any]]  # every run named, in the order named
    experiments: list[dict[str, Any]]  # the experiments named
    comparison: Comparison
    baseline_ids: list[int]  # the baseline side as picked (default: the first value's runs)


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
    runs: Sequence[dict[str, Any]] | None = None,
    experiments: Sequence[dict[str, Any]] = (),
) -> Selection:
    """The named runs compared. The baseline side is `baseline_ids` (added to the selection when
    not named otherwise; with their repeats among the runs if `with_repeats`), by default the runs
    of the first value. `margin` is the equivalence margin E (a fraction; stats.MARGIN). Suspect
    runs are left out of the values unless `include_suspect`. `runs` (with `experiments`) are
    rows already loaded: they are compared as given, and the DB is read only for goodput."""
    base = _unique(baseline_ids)
    if runs is None:
        found, named = gather_runs(db, run_ids=run_ids, experiment_ids=experiment_ids, first=base)
    else:
        if not runs:
            raise SelectionError("no runs selected: name runs or an experiment that has runs")
        found, named = list(runs), list(experiments)
    if with_repeats:
        base = _unique(i for b in base for i in repeats_of(found, b))
    base = base or default_baseline(found)
    comparison = build_comparison(
        found,
        base,
        slo_ms=slo,
        requests=request_loader(db),
        margin=margin,
        include_suspect=include_suspect,
    )
    return Selection(found, named, comparison, base)
