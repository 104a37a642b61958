"""Runs from another tool's result file stored as an experiment of this lab:
each FieldRun (tuning.measure.field) becomes a done run whose summary columns are what compare
reads, with its request rows where the file kept them, so it gets the same verdicts as a run
measured here. The file does not hold the engine's configuration, so the run says so: its
`origin` is `file:<tool>`, its engine `imported`, and no engine identity is stored, so its
fingerprint is incomplete (never offered for reuse) and compare and the report say it.

A run's uid is a digest of what it measured, so importing the same file twice adds nothing.
Every refusal comes before the first write."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.records import NewExperiment
from core.status import Status
from store import StoreError, queries, repo
from store.db import connect
from tuning.engine.params import format_value
from tuning.engine.validate import parse_values
from tuning.measure.field.detect import read_field
from tuning.measure.field.run import FieldError, FieldRun

ORIGIN_PREFIX = "file:"
ENGINE = "imported"  # the run's engine: unknown beyond the parameter the user named


class ImportError_(ValueError):
    """A refusal before any write; the message is one line naming the file or flag."""


@dataclass
class FieldImport:
    """What one import did."""

    format: str
    experiment_id: int | None
    runs_added: list[int] = field(default_factory=list)
    runs_known: list[int] = field(default_factory=list)

    def describe(self) -> str:
        if not self.runs_added:
            runs = " ".join(map(str, self.runs_known))
            return f"{self.format}: nothing added, every run is here already (runs {runs})"
        where = f"experiment {self.experiment_id}"
        return (
            f"{self.format}: {len(self.runs_added)} run(s) added to {where}, "
            f"{len(self.runs_known)} already here"
        )


def run_uid(run: FieldRun) -> str:
    """A digest of what the run measured (its numbers, per-request rows, load and flags)."""
    rows = [(r.start, r.ttft, r.end, r.output_tokens) for r in run.records or []]
    blob = json.dumps(
        [run.tool, run.model, run.summary, run.workload, run.config, rows],
        sort_keys=True,
        default=str,
    )
    return "field-" + hashlib.sha256(blob.encode()).hexdigest()[:32]


def _param_name(text: str) -> str:
    return text.strip().lstrip("-").replace("_", "-")


def _values(runs: list[FieldRun], param: str | None, value: str | None, path: Path) -> list[Any]:
    """The parameter's value of each run: from the file's server flags, else the one named."""
    out = []
    for run in runs:
        if param and param in run.config:
            out.append(run.config[param])
        elif param and value is not None:
            out.append(parse_values(param, value)[0])
        else:
            held = ", ".join(sorted(run.config)) or "no server flags"
            raise ImportError_(
                f"{path}: the file holds {held} for {run.label}: name the server's flag and its "
                "value with --param NAME --value V"
            )
    return out


def _workload(run: FieldRun, param: str, value: Any) -> dict[str, Any]:
    """What the load was, as the file says (the tool's name in it: another tool's load is
    another workload); a workload parameter the user named takes its value."""
    wl = {"imported_from": run.tool, **run.workload}
    if param in wl:
        wl[param] = value
    return wl


def _fingerprint(workload: dict[str, Any], param: str) -> str:
    fixed = {k: v for k, v in workload.items() if k not in ("num_prompts", param)}
    return "imported:" + hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


def _experiment(db: Any, experiment_id: int, param: str) -> dict[str, Any]:
    try:
        exp = queries.get_experiment(db, experiment_id)
    except StoreError:
        raise ImportError_(f"--experiment {experiment_id}: no such experiment") from None
    if exp.get("param") != param:
        raise ImportError_(
            f"--experiment {experiment_id} varies {exp.get('param')}, not {param}: one "
            "parameter per experiment"
        )
    if not str(exp.get("origin") or "").startswith(ORIGIN_PREFIX):
        raise ImportError_(
            f"--experiment {experiment_id} was measured here: imported runs go to an "
            "experiment of imported runs"
        )
    return exp


def _run_fields(run: FieldRun, exp_id: int, seq: int, repeat: int, param: str, value: Any) -> dict:
    workload = _workload(run, param, value)
    in_workload = param in workload
    return {
        "uid": run_uid(run),
        "experiment_id": exp_id,
        "seq": seq,
        "repeat_index": repeat,
        "param": param,
        "value": format_value(value),
        "config_json": {} if in_workload else {param: value},
        "workload_json": workload,
        "workload_fingerprint": _fingerprint(workload, param),
        "engine": ENGINE,
        "model": run.model,
        "backend": run.tool,
        "status": Status.DONE.value,
        "phase": "done",
        "started_at": run.started_at or now_iso(),
        "finished_at": now_iso(),
        "origin": f"{ORIGIN_PREFIX}{run.tool}",
        "notes": f"imported from {run.label} ({run.tool} {run.tool_version or ''})".strip(),
    }


def import_field(
    db_path: str | Path,
    path: str | Path,
    *,
    param: str | None = None,
    value: str | None = None,
    experiment_id: int | None = None,
    author: str = "",
    host: str = "",
) -> FieldImport:
    """Read `path` (a file or a sweep folder) and store its runs; ImportError_ refuses first."""
    path = Path(path)
    try:
        fmt, runs = read_field(path)
    except FieldError as exc:
        raise ImportError_(str(exc)) from None
    name = _param_name(param) if param else None
    if name is None:
        held = {k for r in runs for k in r.config}
        name = next(iter(held)) if len(held) == 1 else None
    if value is not None and name is None:
        raise ImportError_("--value needs --param NAME: which server flag had that value")
    try:
        values = _values(runs, name, value, path)
    except ImportError_:
        raise
    except ValueError as exc:
        raise ImportError_(f"--value {value!r} for {name}: {exc}") from None
    assert name is not None
    result = FieldImport(fmt, experiment_id)
    with connect(db_path) as db:
        exp = _experiment(db, experiment_id, name) if experiment_id else None
        known = queries.run_ids_by_uid(db, [run_uid(r) for r in runs])
        result.runs_known = [known[run_uid(r)] for r in runs if run_uid(r) in known]
        todo = [(r, v) for r, v in zip(runs, values, strict=True) if run_uid(r) not in known]
        if not todo:
            return result
        if exp is None:
            new = NewExperiment(
                param=name,
                values=tuple(dict.fromkeys(v for _, v in todo)),
                name=f"imported {fmt}: {path.name}",
                model=todo[0][0].model,
                author=author,
                host=host,
            )
            stamp = {"status": Status.DONE.value, "phase": "done", "finished_at": now_iso()}
            eid = repo.create_experiment(
                db, new, origin=f"{ORIGIN_PREFIX}{todo[0][0].tool}", **stamp
            )
            exp = queries.get_experiment(db, eid)
        eid = int(exp["id"])
        result.experiment_id = eid
        _store(db, exp, todo, result)
    return result


def _store(
    db: Any, exp: dict[str, Any], todo: list[tuple[FieldRun, Any]], result: FieldImport
) -> None:
    eid = int(exp["id"])
    existing = queries.load_runs(db, queries.experiment_run_ids(db, eid))
    values = list(exp.get("values") or [])
    seq = max((int(r.get("seq") or 0) for r in existing), default=-1) + 1
    for run, value in todo:
        repeat = sum(1 for r in existing if r.get("value") == format_value(value))
        fields = _run_fields(run, eid, seq, repeat, str(exp["param"]), value)
        rid = repo.create_run(db, **fields)
        repo.store_summary(db, rid, run.summary)
        if run.records:
            repo.insert_requests(db, rid, run.records)
        existing.append({"seq": seq, "value": fields["value"]})
        result.runs_added.append(rid)
        if value not in values:
            values.append(value)
        seq += 1
    repo.update_experiment(
        db, eid, values_json=values, runs_total=len(existing), runs_done=len(existing)
    )
