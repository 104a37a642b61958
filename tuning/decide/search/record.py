"""A search as a row of the store (`searches`): what it searches, the process running it, its
status and, once ended, its result. `tuning-lab search` writes it (`recorded`), however it
was started; the UI starts one in the background (`tuning.decide.background`) and reads its
progress from here and from its steps, which are ordinary experiments and runs.

Its decision (tuning.decide.search.decision) is stored with its result when it ends; a search
still running shows the decision its runs make so far, by the same rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.clock import now_iso
from core.status import Status, is_active
from store import connect, queries, repo
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.decide.search.driver import NAME_PREFIX, SearchSpec, StepUnmeasured, judged
from tuning.decide.search.strategy import Space
from tuning.engine.procs import process_start_time, same_process
from tuning.engine.spec import EngineSpec
from tuning.experiment import exits
from tuning.measure.traffic.workload import Workload


def spec_json(spec: SearchSpec) -> dict[str, Any]:
    """What a search's row keeps of its spec (the engine is the lab's at run time)."""
    return {
        "param": spec.param,
        "range": [spec.space.lo, spec.space.hi],
        "integer": spec.space.integer,
        "objective": spec.objective,
        "slo_ms": dict(spec.slo_ms),
        "budget_runs": spec.budget_runs,
        "coarse": spec.coarse,
        "workload": spec.workload.to_dict(),
        "base_config": dict(spec.base_config),
        "base_url": spec.base_url,
        "model": spec.model,
    }


def spec_from_json(data: Mapping[str, Any], engine: EngineSpec | None) -> SearchSpec:
    lo, hi = data["range"]
    return SearchSpec(
        param=str(data["param"]),
        space=Space(float(lo), float(hi), bool(data.get("integer"))),
        objective=str(data["objective"]),
        workload=Workload.from_dict(data["workload"]),
        engine=None if data.get("base_url") else engine,
        base_config=dict(data.get("base_config") or {}),
        slo_ms={str(k): float(v) for k, v in (data.get("slo_ms") or {}).items()},
        budget_runs=int(data.get("budget_runs") or 8),
        coarse=int(data.get("coarse") or 4),
        base_url=data.get("base_url"),
        model=data.get("model"),
    )


def _begin(db_path: Path, spec: SearchSpec, search_id: int | None) -> int:
    pid = os.getpid()
    fields = {
        "key": spec.key(),
        "param": spec.param,
        "spec_json": spec_json(spec),
        "status": Status.RUNNING.value,
        "runner_pid": pid,
        "runner_start_time_s": process_start_time(pid),
        "started_at": now_iso(),
    }
    with connect(db_path) as db:
        if search_id is None:
            return repo.create_search(db, **fields)
        repo.update_search(db, search_id, **fields)
        return search_id


def _end(db_path: Path, search_id: int, status: Status, **fields: Any) -> None:
    with connect(db_path) as db:
        repo.update_search(db, search_id, status=status.value, finished_at=now_iso(), **fields)


def one_line(exc: BaseException) -> str:
    """'ValueError: what went wrong': an error as a row keeps it, on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@contextmanager
def ended(end: Callable[..., None]) -> Iterator[None]:
    """Around a search's or a plan's block: `end(Status.CANCELLED, error=...)` on SIGTERM or
    Ctrl-C (SIGTERM unwinds like Ctrl-C here, so the step's server is stopped) or a step the user
    cancelled (StepUnmeasured),
    `end(Status.FAILED, error=...)` on any other exception (re-raised either way); the block's
    own success is the caller's to write."""
    try:
        with exits.sigterm_interrupts():
            yield
    except KeyboardInterrupt as exc:
        end(Status.CANCELLED, error=f"interrupted by {exits.signal_name(exc)}")
        raise
    except StepUnmeasured as exc:  # a step stopped by the user ends the search cancelled
        end(Status.CANCELLED if exc.cancelled else Status.FAILED, error=one_line(exc))
        raise
    except BaseException as exc:
        end(Status.FAILED, error=one_line(exc))
        raise


@contextmanager
def recorded(
    db_path: Path, spec: SearchSpec, search_id: int | None = None
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """Keep the search's row up to date around the block: running with this process's pid, then
    done with the result the block hands to the yielded function (which adds `search_id`),
    cancelled on SIGTERM or Ctrl-C, else failed (`ended`)."""
    sid = _begin(db_path, spec, search_id)
    result: dict[str, Any] = {}

    def keep(found: dict[str, Any]) -> None:  # the result names its search's row
        found["search_id"] = sid
        result.update(found)

    with ended(lambda status, **fields: _end(db_path, sid, status, **fields)):
        yield keep
    _end(db_path, sid, Status.DONE, result_json=result)


def keep_confirm(db_path: Path, search_id: int, shown: Mapping[str, Any]) -> None:
    """The confirm's result and the choice it makes, written into the search's stored result
    (`search --confirm`, `search confirm ID`): the record holds them once the confirm ran."""
    with connect(db_path) as db:
        row = queries.get_search(db, search_id)
        result = dict(row.get("result") or {})
        result.update(confirm=shown.get("confirm"), choice=shown.get("choice"))
        repo.update_search(db, search_id, result_json=result)


def search_id_for_key(db_path: Path, key: str) -> int | None:
    """The newest search row of this key (the same search: a plan resumed reuses it), or None."""
    if not db_path.exists():
        return None
    with connect(db_path, readonly=True) as db:
        return next((int(r["id"]) for r in queries.list_searches(db) if r["key"] == key), None)


def search_alive(row: Mapping[str, Any]) -> bool:
    """Is the search's process still the one started for it? A queued row without a pid yet is
    being started."""
    pid = int(row.get("runner_pid") or 0)
    if not pid:
        return row.get("status") == Status.QUEUED
    started = row.get("runner_start_time_s")
    return started is not None and same_process(pid, float(started))


def reap_searches(db_path: Path) -> list[int]:
    """Active searches whose process is gone: marked failed; their ids."""
    gone = []
    with connect(db_path) as db:
        for row in queries.list_searches(db, active_only=True):
            if not search_alive(row):
                repo.update_search(
                    db,
                    int(row["id"]),
                    status=Status.FAILED.value,
                    finished_at=now_iso(),
                    error="the search process stopped without finishing (died or was killed); "
                    "start it again with the same settings to resume",
                )
                gone.append(int(row["id"]))
    return gone


@dataclass
class Progress:
    """What the UI shows of a search: its steps (the decision log) and its decision
    (tuning.decide.search.decision: the choice, a tie, or undecided), from the store alone; the
    chosen value's mean objective and its interval over its runs."""

    row: dict[str, Any]
    spec: SearchSpec
    log: list[dict[str, Any]] = field(default_factory=list)
    decision: dict[str, Any] = field(default_factory=dict)
    chosen: float | None = None
    chosen_mean: float | None = None
    interval: tuple[float, float] | None = None
    chosen_runs: list[int] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return is_active(self.row.get("status"))

    @property
    def run_ids(self) -> list[int]:
        return [int(e["run_id"]) for e in self.log]


def progress(db_path: Path, row: Mapping[str, Any]) -> Progress:
    """A search's progress read from the store: its row, its steps' runs, and its decision: the
    one stored with its result once it ended, else the decision its runs make so far (the same
    rule, `judged`)."""
    spec = spec_from_json(row["spec"], None)
    stored, _, decision = judged(db_path, spec, str(row["key"]))
    result = row.get("result") or {}
    if not is_active(row.get("status")) and isinstance(result.get("decision"), Mapping):
        decision = dict(result["decision"])
    out = Progress(dict(row), spec, stored.log, decision)
    chosen = decision.get("chosen")
    if chosen is None:
        return out
    out.chosen = float(chosen)
    found = next((r for r in decision.get("values") or [] if r["value"] == chosen), None)
    if found is not None:
        out.chosen_mean = found.get("mean")
        ci = found.get("interval")
        out.interval = (float(ci[0]), float(ci[1])) if ci else None
    out.chosen_runs = [
        int(e["run_id"])
        for e in stored.log
        if float(e["value"]) == out.chosen
        and e["status"] == Status.DONE
        and e.get(spec.metric) is not None
    ]
    return out


def step_prefix(key: str) -> str:
    """The name every step experiment of the search with this key starts with."""
    return f"{NAME_PREFIX}{key}:"


def objective_label(spec: SearchSpec) -> str:
    metric = METRIC_BY_KEY[spec.metric]
    return f"{metric.label} ({metric.unit}, {metric.better} is better)"
