"""A tuning plan: one search per parameter, in order, each winner the next search's baseline, and
at the end a recommendation measured against the starting configuration.

Every search is an ordinary `tuning.decide.search.driver` search (its own key: parameter, range,
objective, workload, baseline), so a stopped plan resumes from the store: the searches already
done are found again and cost no run, the one that was cut short resumes where it was.

The end: the starting and the recommended configuration run `confirm_repeats` times each,
counterbalanced (start, final, final, start, ...: a linear drift hits both alike), as one-run
experiments named by the plan's key (found again on resume). The gain is the plan's decision
record (tuning.compare.decision.decide_pair: the fixed-n test, Holm over the plan's objective and
the default guards, over per-run values from `comparison.run_metric_values`), stored in the
result as `decision`; the other gain metrics are for information, at a plain 95 %, not corrected.
The recommended configuration is recommended only when that decision says so (objective better,
no guard worse). The two configurations usually differ in more than one parameter, which is
exactly what the one-at-a-time comparison refuses, so the plan applies the rule itself to these
runs (same workload, same engine, nothing else differs).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.status import MEASURED, Status
from store import connect, queries
from tuning.compare.catalog import METRIC_BY_KEY, WORKLOAD_PARAMS
from tuning.compare.comparison import request_loader, run_metric_values
from tuning.compare.decision import Decision, decide_pair
from tuning.compare.inert import InertKnob, inert_for
from tuning.compare.present import VERDICT_LABEL, pct_number, verdict_text
from tuning.compare.primaries import Primaries
from tuning.compare.standing import not_applied
from tuning.compare.stats import bootstrap_change
from tuning.decide.search.driver import SearchSpec, run_search
from tuning.decide.search.plan_record import plan_recorded
from tuning.decide.search.record import recorded, search_id_for_key
from tuning.decide.search.strategy import Space
from tuning.decide.search.words import search_choice_text
from tuning.engine.launch import config_args
from tuning.engine.params import get_param
from tuning.engine.spec import EngineSpec
from tuning.experiment.order import counterbalanced
from tuning.experiment.plan import plan_experiment
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

NAME_PREFIX = "plan "
CARRIER = "concurrency"  # a confirm run's one "parameter": the workload's own concurrency
GAIN_METRICS = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms")
Progress = Callable[[str, dict[str, Any]], None]


@dataclass
class PlanSpec:
    params: list[str]
    spaces: dict[str, Space]
    objective: str
    workload: Workload
    engine: EngineSpec | None
    base_config: dict[str, Any] = field(default_factory=dict)
    slo_ms: dict[str, float] = field(default_factory=dict)
    budget_runs: int = 8  # per search
    coarse: int = 4
    confirm_repeats: int = 3  # runs a side of start vs recommended
    base_url: str | None = None
    model: str | None = None

    def search_spec(self, param: str, config: Mapping[str, Any], workload: Workload) -> SearchSpec:
        return SearchSpec(
            param=param,
            space=self.spaces[param],
            objective=self.objective,
            workload=workload,
            engine=self.engine,
            base_config=dict(config),
            slo_ms=dict(self.slo_ms),
            budget_runs=self.budget_runs,
            coarse=self.coarse,
            base_url=self.base_url,
            model=self.model,
        )

    def validate(self) -> None:
        if not self.params:
            raise ValueError("--params names no parameter")
        names = [get_param(p).name for p in self.params]
        if len(set(names)) != len(names):
            raise ValueError(f"--params names a parameter twice: {','.join(self.params)}")
        missing = [p for p in self.params if p not in self.spaces]
        if missing:
            raise ValueError(
                f"no range for {', '.join(missing)}: add --param-range NAME=LO:HI for each"
            )
        extra = sorted(set(self.spaces) - set(self.params))
        if extra:
            raise ValueError(f"--param-range for {', '.join(extra)}, not in --params")
        if self.confirm_repeats < 2:
            raise ValueError("--confirm-repeats must be at least 2 (an interval needs 2 a side)")
        for param in self.params:  # each search (its objective against its parameter)
            self.search_spec(param, self.base_config, self.workload).validate()

    def key(self) -> str:
        """What makes two plans the same plan (and a later call a resume)."""
        facts = {
            "params": [[p, self.spaces[p].lo, self.spaces[p].hi] for p in self.params],
            "objective": self.search_spec(self.params[0], {}, self.workload).metric,
            "slo": self.slo_ms,
            "workload": self.workload.to_dict(),
            "config": self.base_config,
            "engine": self.engine.to_json() if self.engine else self.base_url,
        }
        return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:10]

    def to_json(self) -> dict[str, Any]:
        """What a plan's row keeps of its spec (the engine is the lab's at run time)."""
        return {
            "params": list(self.params),
            "ranges": {p: [s.lo, s.hi, s.integer] for p, s in self.spaces.items()},
            "objective": self.objective,
            "slo_ms": dict(self.slo_ms),
            "budget_runs": self.budget_runs,
            "coarse": self.coarse,
            "confirm_repeats": self.confirm_repeats,
            "workload": self.workload.to_dict(),
            "base_config": dict(self.base_config),
            "base_url": self.base_url,
            "model": self.model,
        }


def skip_inert(db_path: Path, spec: PlanSpec) -> list[InertKnob]:
    """Drop from `spec` the parameters inert on its workload (tuning.compare.inert: every value
    the stored experiments tried was equivalent), and return them; ValueError when that leaves
    nothing to search."""
    found = inert_for(db_path, spec.workload.fingerprint(), spec.params)
    if not found:
        return []
    kept = [p for p in spec.params if p not in found]
    if not kept:
        raise ValueError(
            f"every parameter of --params is inert on this workload ({skipped_text(found)}): "
            "nothing to search; --include-inert searches them anyway"
        )
    spec.params = kept
    spec.spaces = {p: spec.spaces[p] for p in kept}
    return list(found.values())


def skipped_text(knobs: Mapping[str, InertKnob] | Sequence[InertKnob]) -> str:
    """'enable-prefix-caching (experiment 3: false, true all within the margin)'."""
    items = knobs.values() if isinstance(knobs, Mapping) else knobs
    return "; ".join(
        f"{k.param} (experiment {', '.join(map(str, k.equivalent))}: values "
        f"{', '.join(k.values)} all equivalent)"
        for k in items
    )


def apply_choice(
    config: Mapping[str, Any], workload: Workload, param: str, value: Any
) -> tuple[dict[str, Any], Workload]:
    """The next baseline: a server parameter goes into the config, a workload one (concurrency,
    input-len, ...) into the workload."""
    name = get_param(param).name
    if name in WORKLOAD_PARAMS:
        return dict(config), dataclasses.replace(workload, **{WORKLOAD_PARAMS[name]: value})
    return {**config, name: value}, workload


def serve_command(engine: EngineSpec | None, config: Mapping[str, Any]) -> str | None:
    """`ENV=.. vllm serve MODEL --flag value ...` for a configuration (its server parameters; the
    engine's own environment is the lab's business); None for an attached server."""
    if engine is None:
        return None
    server = {k: v for k, v in config.items() if get_param(k).name not in WORKLOAD_PARAMS}
    flags, env = config_args(server)
    words = [f"{k}={v}" for k, v in sorted(env.items())]
    return shlex.join([*words, "vllm", "serve", engine.model, *flags])


def _confirm_name(key: str, round_: int, side: str) -> str:
    return f"{NAME_PREFIX}{key}: confirm round {round_} {side}"


def _confirm_runs(db_path: Path, key: str, round_: int, side: str) -> list[dict[str, Any]]:
    """The finished (or failed) run of one confirm step, [] when it has not run yet."""
    if not db_path.exists():
        return []
    name = _confirm_name(key, round_, side)
    with connect(db_path, readonly=True) as db:
        for exp in queries.list_experiments(db, True):
            if exp["name"] == name:
                runs = queries.list_runs(db, exp["id"], True)
                kept = [r for r in runs if r["status"] in (*MEASURED, Status.FAILED)]
                if kept:
                    return kept[-1:]
    return []


def _confirm(
    db_path: Path,
    spec: PlanSpec,
    sides: Mapping[str, tuple[dict[str, Any], Workload]],
    say: Progress,
    start_timeout: float,
) -> dict[str, list[dict[str, Any]]]:
    """Run (or find) the confirm runs, counterbalanced (start, final | final, start | ...: a
    drift of the machine hits both alike); the runs of each side. A step is found again by its
    round and side, whatever order it ran in."""
    key = spec.key()
    out: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
    for side, index in counterbalanced(list(sides), spec.confirm_repeats):
        round_, (config, workload) = index + 1, sides[side]
        found = _confirm_runs(db_path, key, round_, side)
        if not found:
            say("confirm", {"round": round_, "side": side})
            exp_id = plan_experiment(
                db_path,
                ExperimentSpec.build(
                    param=CARRIER,
                    values=[workload.concurrency],
                    workload=workload,
                    engine=spec.engine,
                    base_config=config,
                    base_url=spec.base_url,
                    model=spec.model,
                    name=_confirm_name(key, round_, side),
                ),
            )
            run_experiment(db_path, exp_id, start_timeout=start_timeout)
            found = _confirm_runs(db_path, key, round_, side)
        out[side] += found
    return out


def _gain(
    db_path: Path,
    runs: Mapping[str, Sequence[dict[str, Any]]],
    metrics: Sequence[str],
    spec: PlanSpec,
    primaries: Primaries,
) -> tuple[list[dict[str, Any]], Decision]:
    """Recommended vs start for each metric: the change, its interval and the verdict (the
    decision's for the primaries, a plain 95 % for the rest), and the decision record."""
    out = []
    with connect(db_path, readonly=True) as db:
        loader = request_loader(db)
        values = {
            side: [
                run_metric_values(r, spec.slo_ms, loader) for r in members if r["status"] == "done"
            ]
            for side, members in runs.items()
        }
    changed = set(spec.params)
    reasons = not_applied([*runs["start"], *runs["final"]], changed)
    series = {
        side: {k: [v[k] for v in rows if v.get(k) is not None] for k in metrics}
        for side, rows in values.items()
    }
    decision = decide_pair(
        series["start"], series["final"], primaries, baseline="start", candidate="recommended"
    )
    decided = decision.values[0]
    for key in metrics:
        metric = METRIC_BY_KEY[key]
        base, cand = series["start"][key], series["final"][key]
        found = decided.metric(key)
        change = (
            found.change
            if found
            else bootstrap_change(base, cand, metric.better, metric_scale=metric.scale)
        )
        pct = None if change.rel_change is None else change.rel_change * 100

        def as_pct(x: float | None) -> float | None:
            return None if x is None else x * 100

        out.append(
            {
                "metric": key,
                "label": metric.label,
                "unit": metric.unit,
                "better": metric.better,
                "start_mean": change.base_mean,
                "recommended_mean": change.cand_mean,
                "change_pct": pct,
                "ci_low_pct": as_pct(change.rel_low),
                "ci_high_pct": as_pct(change.rel_high),
                "verdict": "not applied" if reasons else change.verdict,
                "verdict_text": VERDICT_LABEL["not applied"] if reasons else verdict_text(change),
                "more_runs_per_side": change.more.to_json()["runs"] if change.more else None,
                "runs_a_side": [change.n_base, change.n_cand],
                "not_applied": reasons,
                "role": primaries.role(key),
                "confidence": change.confidence,
            }
        )
    return out, decision


def run_plan(
    db_path: Path, spec: PlanSpec, progress: Progress | None = None, start_timeout: float = 300.0
) -> dict[str, Any]:
    """Run (or resume) the plan to its end; the recommendation as JSON-ready data. The plan is
    one row of the store (tuning.decide.search.plan_record, its id in `plan_id`), each search one of
    its own (tuning.decide.search.record, its id in the search's `search_id`); a resumed plan and
    its
    searches reuse their rows."""
    spec.validate()
    say = progress or (lambda event, data: None)
    with plan_recorded(db_path, spec.key(), spec.to_json()) as keep:
        config, workload = dict(spec.base_config), spec.workload
        searches: list[dict[str, Any]] = []
        keep({"plan_key": spec.key(), "params": _names(spec), "searches": searches})
        for index, param in enumerate(spec.params, 1):
            search = spec.search_spec(param, config, workload)
            say(
                "search",
                {"index": index, "of": len(spec.params), "param": param, "baseline": config},
            )
            with recorded(db_path, search, search_id_for_key(db_path, search.key())) as kept:
                result = run_search(db_path, search, say, start_timeout=start_timeout)
                kept(result)
            result["baseline"] = {**config, **_workload_params(workload)}
            result["experiment_ids"] = _experiment_ids(db_path, result["runs"])
            searches.append(result)
            keep({"searches": searches})  # the row shows each search as it ends
            # only a decided choice or a named tie (its tie-breaker's pick) is carried on: an
            # undecided search (no value known better, or its SLOs undecided) keeps the baseline
            if result["chosen"] is not None:
                config, workload = apply_choice(config, workload, param, result["chosen"])
        out = _recommend(db_path, spec, searches, (config, workload), say, start_timeout)
        keep(out)
    return out


def _names(spec: PlanSpec) -> list[str]:
    return [get_param(p).name for p in spec.params]


def _recommend(
    db_path: Path,
    spec: PlanSpec,
    searches: list[dict[str, Any]],
    final: tuple[dict[str, Any], Workload],
    say: Progress,
    start_timeout: float,
) -> dict[str, Any]:
    """Start vs recommended, counterbalanced, and the recommendation with its evidence."""
    config, workload = final
    sides = {"start": (dict(spec.base_config), spec.workload), "final": final}
    runs = _confirm(db_path, spec, sides, say, start_timeout)
    objective = searches[0]["objective"]
    primaries = Primaries.parse(objective, None)
    metrics = [*primaries.keys, *(k for k in GAIN_METRICS if k not in primaries.keys)]
    gain, decision = _gain(db_path, runs, metrics, spec, primaries)
    if gain and gain[0]["not_applied"]:
        decision = dataclasses.replace(decision, values=(), reason="not applied by the engine")
    confirm_ids = {side: [int(r["id"]) for r in members] for side, members in runs.items()}
    chosen = {s["param"]: s["chosen"] for s in searches}
    return {
        "plan_key": spec.key(),
        "params": _names(spec),
        "objective": objective,
        "slo_ms": spec.slo_ms,
        "start": {**spec.base_config, **_workload_params(spec.workload)},
        "recommended": {**config, **_workload_params(workload)},
        "chosen": chosen,
        "serve_command": serve_command(spec.engine, config),
        "start_command": serve_command(spec.engine, spec.base_config),
        "gain": gain[0],
        "gains": gain,
        "decision": decision.to_json(),
        "searches": searches,
        "evidence": {
            "search_runs": {s["param"]: s["runs"] for s in searches},
            "search_experiments": {s["param"]: s["experiment_ids"] for s in searches},
            "confirm_runs": confirm_ids,
            "confirm_experiments": _experiment_ids(
                db_path, [*confirm_ids["start"], *confirm_ids["final"]]
            ),
        },
    }


def _workload_params(workload: Workload) -> dict[str, Any]:
    data = workload.to_dict()
    return {name: data[fld] for name, fld in WORKLOAD_PARAMS.items() if fld in data}


def _experiment_ids(db_path: Path, run_ids: Sequence[int]) -> list[int]:
    if not run_ids:
        return []
    with connect(db_path, readonly=True) as db:
        rows = queries.load_runs(db, run_ids)
    return sorted({int(r["experiment_id"]) for r in rows if r.get("experiment_id") is not None})


def summary_lines(result: Mapping[str, Any]) -> list[str]:
    """The recommendation in words (the CLI's text output)."""
    lines = []
    for s in result["searches"]:  # a decided choice or a named tie; undecided keeps the start
        lines.append(
            f"search {s['param']} {s['range'][0]:g}:{s['range'][1]:g}: {search_choice_text(s)} "
            f"({len(s['runs'])} runs {s['runs']}; {s['stopped']})"
        )
    g = result["gain"]
    lines.append(
        f"gain over the start, {g['label']}: {verdict_text_of(g)} "
        f"(runs {result['evidence']['confirm_runs']['start']} vs "
        f"{result['evidence']['confirm_runs']['final']})"
    )
    decision = result.get("decision") or {}
    if decision.get("recommended"):
        lines.append(f"recommended: {result['serve_command'] or result['recommended']}")
    else:
        lines.append(
            f"not recommended: the decision ({decision.get('rule', 'fixed-n')}, Holm over the "
            "objective and guards) did not find the objective better with no guard worse; "
            "more --confirm-repeats would decide it"
        )
    if result.get("skipped_inert"):
        names = ", ".join(k["param"] for k in result["skipped_inert"])
        lines.append(f"skipped, inert on this workload: {names} (--include-inert searches them)")
    return lines


def verdict_text_of(gain: Mapping[str, Any]) -> str:
    """'+12.0 %: ▲ better (95 % CI ...)' from one gain row."""
    pct = gain["change_pct"]
    head = "—" if pct is None else f"{pct_number(pct)} %"
    if gain["verdict"] == "not applied":
        return f"{head}: not applied by the engine ({'; '.join(gain['not_applied'])})"
    return f"{head}: {gain['verdict_text']}"
