"""Recording a search from its `--json` output (`tuning-lab search import FILE`): a lab from
before searches had rows of their own (the `searches` table, m008) holds only the steps, and the
objective and the SLOs live in the JSON the search printed. The row is written only when the
JSON's `search_key` is what its settings and the stored steps' workload, baseline and engine hash
to (tuning.decide.search.driver.SearchSpec.key), so a file cannot be attached to other steps.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from core.status import Status
from store import connect, queries, repo
from tuning.decide.search.driver import SearchSpec
from tuning.decide.search.record import spec_json, step_prefix
from tuning.decide.search.strategy import Space
from tuning.engine.params import get_param
from tuning.engine.spec import EngineSpec
from tuning.measure.traffic.workload import Workload

_COARSE = re.compile(r"coarse pass: \d+ of (\d+)")


def _coarse(log: list[Mapping[str, Any]]) -> int:
    found = [int(m.group(1)) for e in log if (m := _COARSE.match(str(e.get("why") or "")))]
    return max(found, default=4)


def import_result(db_path: Path, data: Mapping[str, Any], source: str = "the file") -> int:
    """Write the search's row (done, with `data` as its result) and return its id; ValueError
    (one line naming `source` and the field) when the JSON does not fit the stored steps."""
    result = data.get("search", data)  # the H200 pipeline wraps it: {"search": {...}}
    if not isinstance(result, Mapping):
        raise ValueError(f"{source}: expected a search's --json output (an object)")
    for name in ("search_key", "param", "range", "objective", "log"):
        if name not in result:
            raise ValueError(f"{source}: no field {name!r} (not a search's --json output)")
    key = str(result["search_key"])
    with connect(db_path) as db:
        if any(str(r["key"]) == key for r in queries.list_searches(db)):
            raise ValueError(f"{source}: search_key {key} is already recorded in this lab")
        steps = queries.search_experiment_ids(db, step_prefix(key))
        if not steps:
            raise ValueError(f"{source}: search_key {key}: no steps of that search in this lab")
        exp = queries.get_experiment(db, steps[0])
    lo, hi = result["range"]
    log = list(result["log"])
    spec = SearchSpec(
        param=str(result["param"]),
        space=Space(float(lo), float(hi), get_param(str(result["param"])).type == "int"),
        objective=str(result["objective"]),
        workload=Workload.from_dict(exp["workload"]),
        engine=EngineSpec(**exp["engine"]) if exp.get("engine") else None,
        base_config=dict(exp.get("config") or {}),
        slo_ms={str(k): float(v) for k, v in (result.get("slo_ms") or {}).items()},
        budget_runs=max(len(log), 2),
        coarse=_coarse(log),
        base_url=exp.get("base_url"),
        model=exp.get("model"),
    )
    if spec.key() != key:
        raise ValueError(
            f"{source}: search_key {key} does not match its settings and the stored steps "
            f"(they hash to {spec.key()})"
        )
    with connect(db_path) as db:
        return repo.create_search(
            db,
            key=key,
            param=spec.param,
            spec_json=spec_json(spec),
            status=Status.DONE.value,
            started_at=exp.get("started_at"),
            finished_at=exp.get("finished_at"),
            result_json=dict(result),
        )
