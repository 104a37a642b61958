"""Planning an experiment: validate the one parameter, its values and the baseline, and write the
experiment row. Nothing starts here; the runner process takes the row from the DB."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from store import connect, repo
from tuning.engine import EngineSpec
from tuning.params import format_value, get_param, validate_config, validate_value
from tuning.settings import load_settings
from tuning.workload import Workload


def schedule(values: list[Any], repeats: int) -> list[tuple[Any, int]]:
    """Interleaved order, A B A B, so drift on a shared machine hits every value alike."""
    return [(value, r) for r in range(max(1, repeats)) for value in values]


def plan_experiment(
    db_path: str | Path,
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
) -> int:
    """Validate everything and write the experiment row; returns its id."""
    p = get_param(param)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a whole number of at least 1, got {repeats!r}")
    clean_values = [validate_value(p.name, v) for v in values]
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
    config = validate_config(config, engine.backend if engine else None)
    if p.restarts_server:
        config.pop(p.name, None)
        for value in clean_values:  # each start as it will be launched (e.g. two KV budgets)
            validate_config({**config, p.name: value}, engine.backend if engine else None)
    with connect(db_path) as db:
        return repo.create_experiment(
            db,
            name=name or f"{p.name} = {', '.join(format_value(v) for v in clean_values)}",
            param=p.name,
            values_json=clean_values,
            repeats=repeats,
            config_json=config,
            workload_json=workload.to_dict(),
            engine_json=engine.to_json() if engine else None,
            base_url=base_url,
            model=model or (engine.served_model_name if engine else None),
            runs_total=len(clean_values) * repeats,
            author=author,
            host=host,
        )
