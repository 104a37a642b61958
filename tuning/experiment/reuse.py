"""Never measure the same thing twice without asking: stored runs whose fingerprint
(tuning.experiment.reuse_match) equals a planned run's are offered, named, dated and by whom, to
count toward the experiment's repeats.

Nothing here decides for the user: `find_offer` only looks (this lab and the team folder's
bundles not imported yet), `apply_offer` copies the offered runs into the experiment's first free
positions of their value, each marked with where it came from (`runs.reused_from_json`), so the
runner measures only what is missing and Compare counts them like the rest. Not offered: failed
or hidden runs, runs the engine did not apply the value on (config mismatch), runs of an attached
server (no engine nor hardware of the lab's to vouch for them), and nothing at all while the
engine's vLLM version is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store import connect, queries, repo
from tuning.engine import hardware
from tuning.engine.params import format_value
from tuning.experiment import outcome
from tuning.experiment.order import counterbalanced
from tuning.experiment.plan import is_imported
from tuning.experiment.reuse_match import UNKNOWN, Match, collect, decoded, run_fingerprint
from tuning.experiment.reuse_team import import_sources, team_matches
from tuning.experiment.run_unit import new_run_fields

SHOWN = 5  # matches named per value in the offer's words; the rest are counted
__all__ = ["Match", "Offer", "ValueOffer", "apply_offer", "decoded", "find_offer"]


@dataclass
class ValueOffer:
    """The earlier runs of one value, and how many of its positions they can fill."""

    value: str
    positions: int
    matches: list[Match] = field(default_factory=list)

    @property
    def count(self) -> int:
        return min(len(self.matches), self.positions)


@dataclass
class Offer:
    """Per value of a (planned or drafted) experiment, the earlier runs it could count."""

    param: str
    values: list[ValueOffer]
    notes: list[str] = field(default_factory=list)  # team bundles that could not be read

    @property
    def count(self) -> int:
        return sum(v.count for v in self.values)

    def lines(self) -> list[str]:
        """One line a value with matches, in the words the CLI prints and the page shows."""
        out = []
        for v in self.values:
            if not v.matches:
                continue
            n = len(v.matches)
            named = "; ".join(m.words() for m in v.matches[:SHOWN])
            more = f"; and {n - SHOWN} more" if n > SHOWN else ""
            fits = "" if n <= v.positions else f" ({v.positions} of them fit its repeats)"
            runs = "earlier run matches" if n == 1 else "earlier runs match"
            out.append(f"{n} {runs} {self.param} = {v.value} exactly ({named}{more}){fits}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "param": self.param,
            "count": self.count,
            "values": [
                {
                    "value": v.value,
                    "positions": v.positions,
                    "count": v.count,
                    "matches": [m.provenance() for m in v.matches],
                }
                for v in self.values
            ],
            "notes": self.notes,
        }


def _wanted(exp: dict[str, Any], hw: dict[str, Any]) -> dict[str, str]:
    """fingerprint -> value, of each value's run as the runner would create it."""
    out: dict[str, str] = {}
    for value in exp.get("values") or []:
        fp = run_fingerprint(decoded(new_run_fields(exp, 0, value, 0, hw)))
        if fp:
            out[fp] = format_value(value)
    return out


def find_offer(
    db_path: str | Path,
    exp: dict[str, Any],
    *,
    team_folder: str | None = None,
    hw: dict[str, Any] | None = None,
) -> Offer:
    """The earlier runs (this lab, then the team folder's new bundles) that measured exactly what
    `exp` (a stored experiment, or `decoded(experiment_fields(...))` for a draft) would."""
    values = [format_value(v) for v in exp.get("values") or []]
    positions = [
        format_value(v) for v, _ in counterbalanced(list(exp.get("values") or []), _rounds(exp))
    ]
    offer = Offer(str(exp.get("param")), [ValueOffer(v, positions.count(v)) for v in values])
    if not exp.get("engine") or exp.get("base_url") or is_imported(exp):
        return offer
    if (exp["engine"] or {}).get("vllm_version") in UNKNOWN:
        offer.notes.append(
            "earlier runs not looked for: this engine's vLLM version is unknown until it starts, "
            "and a run of another version must not count"
        )
        return offer
    wanted = _wanted(exp, hw or hardware.hardware_details())
    with connect(db_path, readonly=True) as db:
        found = collect(queries.reusable_runs(db, exp.get("id")), wanted, "this lab")
    if team_folder:
        for value, matches in team_matches(db_path, team_folder, wanted, offer.notes).items():
            found.setdefault(value, []).extend(matches)
    for v in offer.values:
        seen: set[str] = set()
        ordered = sorted(found.get(v.value, []), key=lambda m: m.finished_at or "", reverse=True)
        ordered.sort(key=lambda m: (m.bundle is not None, m.origin != "local"))  # here first
        for m in ordered:
            if m.evidence not in seen:
                seen.add(m.evidence)
                v.matches.append(m)
    return offer


def _rounds(exp: dict[str, Any]) -> int:
    return max(1, int(exp.get("repeats") or 1))


def apply_offer(db_path: str | Path, experiment_id: int, offer: Offer) -> list[int]:
    """Copy the offered runs into experiment `experiment_id`'s first free positions of their
    value (a team bundle is imported first); returns the copies' ids. The runner then measures
    only the positions left."""
    matches = [m for v in offer.values for m in v.matches]
    local = import_sources(db_path, matches, offer.notes)
    copies: list[int] = []
    with connect(db_path) as db:
        exp = queries.get_experiment(db, experiment_id)
        plan = counterbalanced(list(exp["values"]), _rounds(exp))
        free = outcome.remaining(plan, queries.list_runs(db, experiment_id, include_hidden=True))
        for v in offer.values:
            seqs = [s for s in free if format_value(plan[s][0]) == v.value]
            picked = [(m, local[m.uid]) for m in v.matches if m.uid in local]
            for seq, (m, run_id) in zip(seqs, picked, strict=False):
                copies.append(_copy(db, exp, plan, seq, run_id, m))
        done = len(plan) - len(outcome.remaining(plan, queries.list_runs(db, experiment_id, True)))
        repo.update_experiment(db, experiment_id, runs_done=done)
    return copies


def _copy(
    db: Database, exp: dict[str, Any], plan: list[tuple[Any, int]], seq: int, run_id: int, m: Match
) -> int:
    value, repeat = plan[seq]
    return repo.copy_run(
        db,
        run_id,
        experiment_id=exp["id"],
        seq=seq,
        repeat_index=repeat,
        param=exp["param"],
        value=format_value(value),
        reused_from_json=m.provenance(),
    )
