"""Inert knobs: flags whose tried values were all equivalent on a workload, from the experiments
stored in the lab, so a plan can skip them (`plan` without `--include-inert`), `tuning-lab
inert` lists them and New experiment's picker marks them.

Each stored experiment is compared as Compare would (its runs, the first value as the baseline),
on the watched metrics only (tuning.compare.prefer.WATCHED); each value is judged against vLLM's
default when the experiment ran it, else against the experiment's first value. A knob is inert on
a workload (its fingerprint) when at least one experiment found every value equivalent and no
experiment of that knob on that workload found a watched metric decided better or worse. An
experiment that decided nothing (single runs, too much noise) neither makes nor breaks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.status import Status
from store import StoreError, connect, queries
from tuning.compare.comparison import build_comparison, default_baseline
from tuning.compare.defaults import engine_default
from tuning.compare.prefer import WATCHED, default_side, judge, watched
from tuning.compare.present import CLEAR
from tuning.compare.stats import MARGIN
from tuning.engine.params import ParamError, get_param


@dataclass
class InertKnob:
    """One flag on one workload, and the experiments that judged it."""

    param: str
    fingerprint: str
    workload: dict[str, Any]
    equivalent: list[int] = field(default_factory=list)  # experiments: every value equivalent
    differed: list[int] = field(default_factory=list)  # experiments: a metric better or worse
    values: list[str] = field(default_factory=list)  # every value tried
    reference: str = ""  # what the values were judged against, in words

    @property
    def inert(self) -> bool:
        return bool(self.equivalent) and not self.differed

    @property
    def workload_text(self) -> str:
        """'24 requests, concurrency 8, 64 in / 16 out'."""
        w = self.workload
        return (
            f"{w.get('num_requests', '?')} requests, concurrency {w.get('concurrency', '?')}, "
            f"{w.get('input_len', '?')} in / {w.get('output_len', '?')} out"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "workload_fingerprint": self.fingerprint,
            "workload": self.workload,
            "inert": self.inert,
            "values": self.values,
            "judged_against": self.reference,
            "experiments_equivalent": self.equivalent,
            "experiments_differed": self.differed,
        }


def _server_flag(param: str | None) -> bool:
    if not param:
        return False
    try:
        return get_param(param).kind != "workload"
    except ParamError:  # a flag learned from the engine's parser: a server flag
        return True


def _judge_experiment(
    db: Any, runs: Sequence[Mapping[str, Any]], margin: float
) -> tuple[str, list[str], str] | None:
    """('equivalent' | 'differed' | 'undecided', values, reference) of one experiment's runs."""
    comparison = build_comparison(runs, default_baseline(runs), margin=margin, metric_keys=WATCHED)
    if comparison.param is None or not comparison.candidates:
        return None
    at_default = default_side(comparison, engine_default(db, comparison.param, runs))
    ref = at_default or comparison.baseline
    reference = f"{'vLLM default' if at_default else 'first value'} {ref.value}"
    judged = [j for j in judge(comparison, ref, watched(comparison)) if j.state != "default"]
    values = [str(s.value) for s in comparison.sides]
    if any(c.verdict in CLEAR for j in judged for c in j.changes.values()):
        return "differed", values, reference
    if judged and all(j.state == "equivalent" for j in judged):
        return "equivalent", values, reference
    return "undecided", values, reference


def knobs(db: Any, fingerprint: str | None = None, margin: float = MARGIN) -> list[InertKnob]:
    """Every (flag, workload) some stored experiment judged, inert or not."""
    found: dict[tuple[str, str], InertKnob] = {}
    for exp in sorted(queries.list_experiments(db), key=lambda e: int(e["id"])):
        if not _server_flag(exp.get("param")):
            continue
        ids = queries.experiment_run_ids(db, int(exp["id"]))
        runs = [
            r
            for r in queries.load_runs(db, ids)
            if r.get("status") == Status.DONE and not r.get("hidden")
        ]
        fps = {r.get("workload_fingerprint") for r in runs}
        if len(fps) != 1 or None in fps or (fingerprint and fingerprint not in fps):
            continue
        outcome = _judge_experiment(db, runs, margin)
        if outcome is None:
            continue
        state, values, reference = outcome
        fp = str(runs[0]["workload_fingerprint"])
        name = str(exp["param"])
        workload = dict(runs[0].get("workload") or {})
        knob = found.setdefault((name, fp), InertKnob(name, fp, workload))
        if state == "equivalent":
            knob.equivalent.append(int(exp["id"]))
        elif state == "differed":
            knob.differed.append(int(exp["id"]))
        knob.values += [v for v in values if v not in knob.values]
        knob.reference = knob.reference or reference
    return list(found.values())


def inert_knobs(db: Any, fingerprint: str | None = None, margin: float = MARGIN) -> list[InertKnob]:
    """The inert knobs (of one workload when `fingerprint` is given)."""
    return [k for k in knobs(db, fingerprint, margin) if k.inert]


def inert_for(db_path: Path, fingerprint: str, params: Iterable[str]) -> dict[str, InertKnob]:
    """Which of `params` are inert on the workload `fingerprint`, from the lab at `db_path`
    (none when there is no lab yet)."""
    if not Path(db_path).exists():
        return {}
    try:
        with connect(db_path, readonly=True) as db:
            found = {k.param: k for k in inert_knobs(db, fingerprint)}
    except StoreError:
        return {}
    return {p: found[p] for p in params if p in found}
