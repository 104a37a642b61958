"""Never measure the same thing twice without asking: stored runs whose fingerprint (engine and
its vLLM version, the whole flag configuration, model, hardware, workload) equals a planned run's
are offered, named, dated and by whom, to count toward the experiment's repeats.

Nothing here decides for the user: `find_offer` only looks (this lab and the team folder's
bundles not imported yet), `apply_offer` copies the offered runs into the experiment's first free
positions of their value, each marked with where it came from (`runs.reused_from_json`), so the
runner measures only what is missing and Compare counts them like the rest. Not offered: failed
or hidden runs, runs the engine did not apply the value on (config mismatch), runs of an attached
server (no engine nor hardware of the lab's to vouch for them).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from store import connect, queries, repo
from tuning import hardware
from tuning.experiment import outcome
from tuning.experiment.plan import is_imported, schedule
from tuning.experiment.planned import spec_of
from tuning.experiment.run_unit import new_run_fields
from tuning.params import format_value
from tuning.traffic.fingerprint import spec_digest
from tuning.workload import Workload

# The run columns a fingerprint holds besides its configuration and workload.
IDENTITY = ("engine", "backend", "vllm_version", "model", "hardware")
SHOWN = 5  # matches named per value in the offer's words; the rest are counted
UNKNOWN = (None, "", "unknown")  # a part no fingerprint can vouch for


def decoded(fields: dict[str, Any]) -> dict[str, Any]:
    """Row columns as the store reads them back: `x_json` under `x` (`hardware_info` where a
    plain `hardware` exists), through JSON so a draft compares like a stored row."""
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key.endswith("_json"):
            name = key[:-5] + ("_info" if key[:-5] in fields else "")
            out[name] = json.loads(json.dumps(value, default=str))
        else:
            out.setdefault(key, value)
    return out


def _workload_key(run: dict[str, Any]) -> str | None:
    """The workload a run replayed: its traffic spec's digest, else the classic workload's."""
    try:
        spec = spec_of(run.get("workload_spec"))
        if spec is not None:
            return "spec:" + spec_digest(spec)
        return "classic:" + Workload.from_dict(run.get("workload") or {}).fingerprint()
    except (TypeError, ValueError, KeyError):  # a row this lab cannot read is no evidence
        return None


def fingerprint(run: dict[str, Any]) -> str | None:
    """16 hex chars naming what a run measured; None when a part is unknown (never a match)."""
    parts: dict[str, Any] = {key: run.get(key) for key in IDENTITY}
    parts["config"] = run.get("config")
    parts["workload"] = _workload_key(run)
    if any(parts[k] in UNKNOWN for k in ("engine", "vllm_version", "hardware", "workload")):
        return None
    if run.get("engine") == "attached" or not isinstance(parts["config"], dict):
        return None
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def usable(run: dict[str, Any]) -> bool:
    """A measured run whose engine applied what it was asked (no stored config mismatch)."""
    mismatch = run.get("config_mismatch")
    return run.get("status") == "done" and not (isinstance(mismatch, list) and mismatch)


@dataclass(frozen=True)
class Match:
    """One earlier run that measured exactly what a planned run would."""

    uid: str
    evidence: str  # the uid of the run that measured it (a copy's source), counted once
    run_id: int | None  # None: in a team bundle not imported yet
    experiment_id: int | None
    finished_at: str | None
    author: str | None
    host: str | None
    origin: str  # 'local' or the bundle it was imported from ('bundle:<uid> from a@b')
    where: str  # 'this lab' or 'team folder: <file>'
    bundle: str | None = None  # the team bundle's path, imported when the offer is taken

    def words(self) -> str:
        """'run 12, 2026-12-04, by ana@box' (plus where it came from when not measured here)."""
        name = f"run {self.run_id}" if self.run_id is not None else f"run {self.uid[:8]}"
        when = (self.finished_at or "")[:10] or "undated"
        who = f"{self.author or 'unknown'}@{self.host or 'unknown'}"
        came = "" if self.origin == "local" else f", imported ({self.origin})"
        there = "" if self.where == "this lab" else f", {self.where}"
        return f"{name}, {when}, by {who}{came}{there}"

    def provenance(self) -> dict[str, Any]:
        """What the copy's `reused_from_json` keeps."""
        return {k: v for k, v in asdict(self).items() if k != "bundle"}


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


def _match(run: dict[str, Any], where: str, bundle: str | None = None) -> Match:
    source = run.get("reused_from") or {}  # a copy names the run it copies
    local = bundle is None
    return Match(
        uid=str(run["uid"]),
        evidence=str(source.get("uid") or run["uid"]),
        run_id=int(run["id"]) if local else None,
        experiment_id=int(run["experiment_id"]) if local and run.get("experiment_id") else None,
        finished_at=run.get("finished_at"),
        author=run.get("author"),
        host=run.get("host"),
        origin=str(run.get("origin") or "local"),
        where=where,
        bundle=bundle,
    )


def _wanted(exp: dict[str, Any], hw: dict[str, Any]) -> dict[str, str]:
    """fingerprint -> value, of each value's run as the runner would create it."""
    out: dict[str, str] = {}
    for value in exp.get("values") or []:
        fp = fingerprint(decoded(new_run_fields(exp, 0, value, 0, hw)))
        if fp:
            out[fp] = format_value(value)
    return out


def collect(
    runs: list[dict[str, Any]], wanted: dict[str, str], where: str, bundle: str | None = None
) -> dict[str, list[Match]]:
    """value -> matches among `runs` (copies and their original count once)."""
    found: dict[str, list[Match]] = {}
    for run in runs:
        fp = fingerprint(run) if usable(run) else None
        if fp in wanted:
            found.setdefault(wanted[str(fp)], []).append(_match(run, where, bundle))
    return found


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
    positions = [format_value(v) for v, _ in schedule(list(exp.get("values") or []), _rounds(exp))]
    offer = Offer(str(exp.get("param")), [ValueOffer(v, positions.count(v)) for v in values])
    if not exp.get("engine") or exp.get("base_url") or is_imported(exp):
        return offer
    if (exp["engine"] or {}).get("vllm_version") in UNKNOWN:
        offer.notes.append(
            "earlier runs not looked for: this engine's vLLM version is unknown until it starts, "
            "and a run of another version must not count"
        )
        return offer
    wanted = _wanted(exp, hw or hardware.describe())
    with connect(db_path, readonly=True) as db:
        found = collect(queries.reusable_runs(db, exp.get("id")), wanted, "this lab")
    if team_folder:
        from tuning.experiment.reuse_team import team_matches

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
    from tuning.experiment.reuse_team import import_sources

    matches = [m for v in offer.values for m in v.matches]
    local = import_sources(db_path, matches, offer.notes)
    copies: list[int] = []
    with connect(db_path) as db:
        exp = queries.get_experiment(db, experiment_id)
        plan = schedule(list(exp["values"]), _rounds(exp))
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
