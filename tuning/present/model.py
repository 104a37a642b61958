"""One report model per comparison, built once and consumed by every writer: the Compare page,
`compare` (text and --json), the HTML report and the table exports (as GuideLLM's outputs are one
report model and one writer per format).

The model is the selection's runs and comparison, the decision record that judges it (the
experiment's own, tuning.experiment.decision, when the runs are one whole experiment as it ran;
else an ad-hoc look, said to be one), the recommendation that record allows
(tuning.compare.prefer) and the headline in its words (tuning.compare.headline). The decision's
verdicts are laid on the comparison's primary metrics (`apply_decision`), so the tables and the
exports show the record, never a second test.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from store import queries
from tuning.compare.comparison import Comparison, default_baseline
from tuning.compare.decision import Decision, apply_decision, decide_adhoc
from tuning.compare.defaults import engine_default
from tuning.compare.headline import Headline, headline
from tuning.compare.prefer import Preference, prefer_default
from tuning.compare.primaries import Primaries
from tuning.compare.selection import Selection, select_runs
from tuning.compare.stats import MARGIN
from tuning.experiment.decision import decision_of


@dataclass(frozen=True)
class ReportModel:
    """Everything a writer needs of one comparison."""

    runs: list[dict[str, Any]]
    experiments: list[dict[str, Any]]
    comparison: Comparison
    decision: Decision
    preference: Preference
    headline: Headline
    command: str | None = None  # the CLI line that would decide it (`experiment --resume ...`)

    @property
    def experiment_id(self) -> int | None:
        return self.decision.experiment_id if self.decision.decides else None

    def extra_json(self) -> dict[str, Any]:
        """What `compare --json` and the JSON export add to the comparison's own JSON."""
        step = self.decision.next_step
        return {
            "decision": self.decision.to_json(),
            "headline": self.headline.sentences,
            "headline_rule": self.headline.rule,
            "headline_recommendation": self.headline.to_json()["recommendation"],
            "next_step": (
                {"text": step.text(), "command": self.command, **step.to_json()}
                if step and self.decision.undecided
                else None
            ),
            "prefer_default": self.preference.to_json(),
        }


def _why_adhoc(
    db: Any,
    selection: Selection,
    *,
    named_runs: bool,
    experiment_ids: Sequence[int],
    include_suspect: bool,
    margin: float,
) -> tuple[dict[str, Any] | None, str]:
    """(the experiment whose record judges these runs, '') or (None, why the look is ad hoc)."""
    if named_runs:
        return None, "runs named one by one"
    exps = {r.get("experiment_id") for r in selection.runs}
    if len(experiment_ids) != 1 or len(exps) != 1:
        return None, f"runs of {max(len(exps), len(experiment_ids))} experiments"
    exp = next((e for e in selection.experiments if int(e["id"]) == int(experiment_ids[0])), None)
    if exp is None or exps != {int(exp["id"])}:
        return None, "runs of another experiment"
    ids = {int(r["id"]) for r in selection.runs}
    left = [i for i in queries.experiment_run_ids(db, int(exp["id"])) if i not in ids]
    if left:
        return None, f"runs {', '.join(map(str, left))} of experiment {exp['id']} left out"
    if set(selection.baseline_ids) != set(default_baseline(selection.runs)):
        return None, "a baseline other than the experiment's first value"
    if include_suspect:
        return None, "suspect runs counted"
    if abs(margin - MARGIN) > 1e-12:
        return None, f"a margin of {margin * 100:g} %, not the experiment's {MARGIN * 100:g} %"
    return exp, ""


def model_of(
    db: Any,
    selection: Selection,
    *,
    named_runs: bool = False,
    experiment_ids: Sequence[int] = (),
    include_suspect: bool = False,
    margin: float = MARGIN,
    db_hint: str | None = None,
) -> ReportModel:
    """The model of a selection: its decision (the experiment's record, or an ad-hoc look), the
    recommendation and the headline; `db_hint` goes into the command that would decide it."""
    comparison = selection.comparison
    exp, why = _why_adhoc(
        db,
        selection,
        named_runs=named_runs,
        experiment_ids=experiment_ids,
        include_suspect=include_suspect,
        margin=margin,
    )
    if exp is not None:
        decision = decision_of(db, exp)
    else:
        owners = {r.get("experiment_id") for r in selection.runs}
        one = next((e for e in selection.experiments if e.get("id") in owners), None)
        decision = decide_adhoc(comparison, Primaries.of(one if len(owners) == 1 else None), why)
    apply_decision(comparison, decision)
    default = engine_default(db, comparison.param or "", selection.runs)
    preference = prefer_default(comparison, default, decision)
    step = decision.next_step
    command = step.command(decision.experiment_id, db_hint) if step and decision.decides else None
    lead = headline(comparison, decision, preference, command)
    return ReportModel(
        selection.runs,
        selection.experiments,
        comparison,
        decision,
        preference,
        lead,
        command,
    )


def build_model(
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
    named_runs: bool | None = None,
    db_hint: str | None = None,
) -> ReportModel:
    """Select and compare the runs named (tuning.compare.selection; `runs` already loaded are
    used as they are, `named_runs` saying whether a user picked them one by one) and build
    their model. SelectionError / StoreError say what is wrong."""
    run_ids, experiment_ids = list(run_ids), list(experiment_ids)
    selection = select_runs(
        db,
        run_ids=run_ids,
        experiment_ids=experiment_ids,
        baseline_ids=baseline_ids,
        with_repeats=with_repeats,
        slo=slo,
        margin=margin,
        include_suspect=include_suspect,
        runs=runs,
        experiments=experiments,
    )
    return model_of(
        db,
        selection,
        named_runs=bool(run_ids) if named_runs is None else named_runs,
        experiment_ids=experiment_ids,
        include_suspect=include_suspect,
        margin=margin,
        db_hint=db_hint,
    )
