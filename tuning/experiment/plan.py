"""Planning an experiment: write the row of a validated `ExperimentSpec` (tuning.experiment.spec),
queued, and plan a local rerun of an imported one. Nothing starts here; the runner process takes
the row from the DB."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from store import connect, repo
from tuning.engine.spec import EngineSpec
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload
from tuning.settings import load_settings


def plan_experiment(db_path: str | Path, spec: ExperimentSpec) -> int:
    """Write the experiment `spec` describes (queued; a runner takes it); returns its id. Who
    asks and where default to the settings' when the spec leaves them empty."""
    if not spec.author or not spec.host:
        settings = load_settings()
        spec = replace(
            spec,
            author=spec.author or settings.resolved_author(),
            host=spec.host or settings.resolved_host(),
        )
    with connect(db_path) as db:
        return repo.create_experiment(db, spec.row())


class ImportedExperimentError(ValueError):
    """An experiment that came in a bundle: read-only, and its engine command is never run."""


def is_imported(exp: dict[str, Any]) -> bool:
    return str(exp.get("origin") or "local").startswith("bundle:")


def refuse_imported(exp: dict[str, Any]) -> None:
    """ImportedExperimentError for an experiment that came in a bundle (its stored engine command
    is a teammate's, or a forger's: `/bin/sh -c ...`)."""
    if is_imported(exp):
        raise ImportedExperimentError(
            f"experiment {exp['id']} was imported ({exp['origin']}): it is read-only and its "
            "engine command is never run here. To measure the same sweep on this machine, "
            f"run `tuning-lab run-experiment --experiment {exp['id']} --use-local-engine` "
            "(a new local experiment with this lab's engine)"
        )


def plan_rerun(
    db_path: str | Path, experiment_id: int, engine: EngineSpec, *, author: str = "", host: str = ""
) -> int:
    """A new local experiment with the same parameter, values, baseline, workload and repeats as
    `experiment_id`, run by `engine` (this lab's own, never the stored command); returns its id."""
    from store import queries
    from tuning.experiment.planned import spec_of

    with connect(db_path, readonly=True) as db:
        exp = queries.get_experiment(db, experiment_id)
    spec = ExperimentSpec.build(
        param=str(exp["param"]),
        values=list(exp["values"] or []),
        workload=Workload.from_dict(exp["workload"] or {}),
        engine=engine,
        base_config=dict(exp["config"] or {}),  # the teammate's baseline, on this lab's engine
        repeats=int(exp["repeats"] or 1),
        name=f"{exp['name'] or exp['param']} (rerun of {exp['uid'][:8]} on the local engine)",
        author=author,
        host=host,
        workload_spec=spec_of(exp.get("workload_spec")),  # the same traffic, when it had a spec
        db_path=db_path,
    )
    return plan_experiment(db_path, spec)
