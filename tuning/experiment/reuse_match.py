"""What makes two runs the same measurement (issue 25 item 3, issue 41): a run's fingerprint,
which stored runs may stand for a planned one, and a match as the offer names it.
tuning.experiment.reuse makes the offer; tuning.experiment.reuse_team looks in the team folder.

The fingerprint is computed from what the run row itself stores, never from a stored fingerprint
nor from the served name: the engine's identity (tuning.engine.identity: its command and
arguments, the model as a path or hub id with its config.json's hash, the load format, the
engine's and the inherited environment knobs), the engine kind, backend and vLLM version, the
whole flag configuration, the hardware description and the workload (recomputed from the stored
workload or spec). A run with any unknown part (a row written before the lab stored its engine's
identity, a model whose config could not be read) has no fingerprint and is never offered."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

from tuning.engine.identity import identity_problem
from tuning.experiment.planned import spec_of
from tuning.measure.traffic.fingerprint import spec_digest
from tuning.measure.traffic.workload import Workload

# The run columns a fingerprint holds besides its configuration and workload: `model` is only the
# served name; the model itself (path or hub id, config hash) is in `engine_identity`.
IDENTITY = ("engine", "backend", "vllm_version", "model", "hardware", "hardware_info")
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


def run_fingerprint(run: dict[str, Any]) -> str | None:
    """16 hex chars naming what a run measured; None when a part is unknown (never a match)."""
    parts: dict[str, Any] = {key: run.get(key) for key in IDENTITY}
    parts["config"] = run.get("config")
    parts["workload"] = _workload_key(run)
    parts["engine_identity"] = identity = run.get("engine_identity")
    if any(parts[k] in UNKNOWN for k in ("engine", "vllm_version", "hardware", "workload")):
        return None
    if run.get("engine") == "attached" or not isinstance(parts["config"], dict):
        return None
    if identity_problem(identity) is not None:
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


def wanted_value(run: dict[str, Any], wanted: dict[str, str]) -> str | None:
    """The planned value `run` could stand for (its fingerprint is wanted), or None."""
    fp = run_fingerprint(run) if usable(run) else None
    return wanted.get(fp) if fp else None


def collect(
    runs: list[dict[str, Any]], wanted: dict[str, str], where: str, bundle: str | None = None
) -> dict[str, list[Match]]:
    """value -> matches among `runs` (copies and their original count once)."""
    found: dict[str, list[Match]] = {}
    for run in runs:
        value = wanted_value(run, wanted)
        if value is not None:
            found.setdefault(value, []).append(_match(run, where, bundle))
    return found
