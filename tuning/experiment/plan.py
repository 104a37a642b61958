"""Planning an experiment: validate the one parameter, its values and the baseline, and write the
experiment row. Nothing starts here; the runner process takes the row from the DB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from store import connect, repo
from tuning.engine.params import get_param
from tuning.engine.shown import show_value
from tuning.engine.spec import EngineSpec
from tuning.engine.validate import validate_config, validate_value
from tuning.experiment.repeats import AutoRepeats
from tuning.measure.traffic import WorkloadSpec
from tuning.measure.traffic.workload import Workload
from tuning.settings import load_settings


def plan_experiment(db_path: str | Path, **plan: Any) -> int:
    """Validate everything and write the experiment row; returns its id (`experiment_fields`
    takes the same keywords)."""
    fields = experiment_fields(**plan)
    with connect(db_path) as db:
        return repo.create_experiment(db, **fields)


def experiment_fields(
    *,
    param: str,
    values: list[Any],
    workload: Workload,
    engine: EngineSpec | None,
    base_config: dict[str, Any] | None = None,
    repeats: int = 1,
    base_url: str | None = None,
    model: str | None = None,
    name: str | None = None,
    author: str = "",
    host: str = "",
    auto: AutoRepeats | None = None,
    workload_spec: WorkloadSpec | None = None,
) -> dict[str, Any]:
    """The experiment row's columns, everything validated, nothing written (a draft can be
    checked for earlier runs before it is planned). With `auto` (repeat until decided) it starts
    with `auto.first_rounds` rounds and the runner adds more."""
    learned = engine.learned_params() if engine else {}
    p = get_param(param, learned)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1, got {repeats!r}")
    clean_values = [validate_value(p.name, v, learned) for v in values]
    if base_url is None and engine is None:
        raise ValueError("an experiment needs an engine to start or a base URL to attach to")
    if base_url is not None and p.restarts_server:
        raise ValueError(
            f"{p.name} needs a server restart; an attached server (base URL) can only "
            "vary workload parameters: concurrency, input-len, output-len, "
            "shared-prefix-len"
        )
    if not author or not host:
        settings = load_settings()
        author, host = author or settings.resolved_author(), host or settings.resolved_host()
    config = dict(engine.baseline if engine else {})
    config.update(base_config or {})
    backend = engine.backend if engine else None
    config = validate_config(config, backend, learned)
    if p.restarts_server:
        config.pop(p.name, None)
        for value in clean_values:  # each start as it will be launched (e.g. two KV budgets)
            validate_config({**config, p.name: value}, backend, learned)
    if not p.restarts_server:  # each value as it will be applied (a spec's knob, or the workload)
        from tuning.experiment.planned import apply_value

        for value in clean_values:
            apply_value(workload, workload_spec, p.name, value)
    repeats = auto.first_rounds if auto else max(1, repeats)
    return dict(
        name=name or f"{p.name} = {', '.join(show_value(p.name, v) for v in clean_values)}",
        param=p.name,
        values_json=clean_values,
        repeats=repeats,
        config_json=config,
        workload_json=workload.to_dict(),
        workload_spec_json=workload_spec.to_dict() if workload_spec else None,
        engine_json=engine.to_json() if engine else None,
        base_url=base_url,
        model=model or (engine.served_model_name if engine else None),
        runs_total=len(clean_values) * repeats,
        author=author,
        host=host,
        **(auto.columns() if auto else {}),
    )


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
            f"run `python -m tuning run-experiment --id {exp['id']} --use-local-engine` "
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
    return plan_experiment(
        db_path,
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
    )
