"""How long an experiment, a search or a plan will take, said before it starts and while it runs.

A run of the lab is made of three parts, each measured on every stored run: the start (launch to
`/health` 200: `runs.time_to_healthy_s`, none when the server was reused), the load (the summary's
`duration`, scaled to the workload by the earlier runs' output tok/s) and the rest (the run's wall
time minus both: the previous server's stop, the warm-ups, storing). An experiment adds what it
spends outside its runs (the runner's start and the last server's stop). The model takes the mean
of each part over the newest measured runs of the same engine (its command and model) in this
lab's DB; with none, a stated guess per engine kind. While an experiment runs, its own finished
runs replace those numbers part by part as they come in (`blend`), and the budget of
`--repeats auto` (tuning.experiment.repeats) asks the same model whether one more round fits.
A stored value outside a sane range (core.plausible: not finite, negative, a part over a day, a
throughput no server reaches) is not a measurement: it is ignored, and the estimate says so.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlite_utils import Database

from core.clock import age_s
from core.plausible import MAX_PART_S, in_range
from store import queries, timings
from tuning.engine import hardware
from tuning.experiment import switch_cost as sw  # the repeats that switch resident servers
from tuning.experiment.outcome import finished
from tuning.experiment.run_parts import Parts
from tuning.experiment.run_parts import mean as _mean
from tuning.experiment.run_parts import span_s as span_s  # where repeats reads it
from tuning.measure.traffic.workload import Workload

HISTORY_RUNS = 20  # the newest measured runs of the engine the model averages
HISTORY_EXPERIMENTS = 10  # ... and the newest experiments whose time outside runs it takes


@dataclass(frozen=True)
class Guess:
    """What a run costs on an engine the lab has no run of yet, and where the numbers come from."""

    start_s: float
    output_tok_s: float
    rest_s: float
    experiment_s: float
    source: str


# Per engine kind; the reference notes are in the repository's shared/reference folder.
GUESSES: dict[str, Guess] = {
    "embedded-cpu": Guess(
        40.0,
        2000.0,
        5.0,
        5.0,
        "the embedded CPU engine's measured 40 s to healthy on a cold compile cache (25 s warm) "
        "and about 2,000 output tok/s, engine-cpu-measured.md",
    ),
    "custom": Guess(
        90.0,
        5000.0,
        10.0,
        10.0,
        "a GPU vLLM: 40-117 s to healthy (a 1B model on an H200, warm to cold), 5,000 tok/s",
    ),
    "attached": Guess(0.0, 2000.0, 2.0, 1.0, "an attached server: no start, 2,000 output tok/s"),
}


@dataclass(frozen=True)
class Costs:
    """One run's parts in seconds, what an experiment adds, and what the numbers rest on."""

    start_s: float
    load_s: float
    rest_s: float
    experiment_s: float
    basis: str  # "from 7 earlier runs of this engine" or "no runs of this engine yet: a guess"
    measured_runs: int = 0  # 0: every part is a guess
    source: str = ""  # where a guess comes from
    ignored: str = ""  # stored values left out as outside a sane range, in words
    # A start that compiles anew (vLLM's compile cache missed): measured apart from the warm
    # `start_s` on this engine; None when its history has no such start (or only such starts).
    cold_start_s: float | None = None
    # Resident engines (tuning.experiment.switch_cost): a measured switch's seconds (None: the
    # known cost), and every how many repeats a value restarts (0: every run restarts).
    switch_s: float | None = None
    switch_every: int = 0
    switch_paused: bool = False  # a CPU vLLM's servers are paused: its own guess until measured

    def switch_cost(self) -> float:
        return sw.guess_s(self.switch_paused) if self.switch_s is None else self.switch_s

    def run_s(self, restart: bool = True) -> float:
        """A run's mean wall time; without a restart (a workload value on a kept server) no
        start; where its repeats switch resident servers, a switch for the runs that switch."""
        share = sw.switch_share(self.switch_every) if restart else 0.0
        start = (1 - share) * self.start_s + share * self.switch_cost() if restart else 0.0
        return start + self.load_s + self.rest_s

    def cold_extra_s(self) -> float:
        """What a cold start costs over a warm one (0 when not known)."""
        return max(0.0, self.cold_start_s - self.start_s) if self.cold_start_s else 0.0

    def describe(self) -> str:
        cold = f" ({_s(self.cold_start_s)} cold)" if self.cold_start_s else ""
        cold += sw.switch_words(self)
        return (
            f"{self.basis}: start {_s(self.start_s)}{cold}, load {_s(self.load_s)}, "
            f"stop and the rest {_s(self.rest_s)} a run"
            + (f"; from {self.source}" if self.source else "")
            + (f"; {self.ignored}" if self.ignored else "")
        )


@dataclass(frozen=True)
class Estimate:
    """Expected runs and seconds of an experiment, a search or a plan (`max_*`: the most it may
    take, for `--repeats auto` and searches that can stop early)."""

    what: str
    runs: int
    seconds: float
    costs: Costs
    max_runs: int | None = None
    max_seconds: float | None = None
    note: str = ""

    def line(self) -> str:
        head = f"estimate: {self.runs} runs, {about(self.seconds)}"
        if self.max_runs is not None and self.max_seconds is not None:
            head = (
                f"estimate: {self.runs} runs first, {about(self.seconds)}; at most "
                f"{self.max_runs} runs, {about(self.max_seconds)}"
            )
        note = f"; {self.note}" if self.note else ""
        return f"{head} ({self.costs.describe()}){note}"

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["costs"] = {**asdict(self.costs), "run_s": self.costs.run_s()}
        out["line"] = self.line()
        return out


def _s(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{round(seconds):d} s"


def about(seconds: float) -> str:
    """'about 40 s' under 90 s, else 'about 4 min' (rounded: an estimate, not a promise)."""
    if seconds < 10:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90:
        return f"about {round(seconds / 5) * 5} s"
    return f"about {round(seconds / 60)} min"


def planned_tokens(workload: Workload) -> int:
    """Output tokens one run's measured load produces (every request generates output_len)."""
    return workload.num_requests * workload.output_len


def engine_kind(engine: Mapping[str, Any] | None) -> str:
    if engine is None:
        return "attached"
    return "embedded-cpu" if engine.get("name") == "embedded-cpu" else "custom"


def costs_from(
    history: Sequence[Mapping[str, Any]],
    spans: Sequence[Mapping[str, Any]],
    workload: Workload,
    kind: str,
) -> Costs:
    """The model from this engine's earlier measured runs (newest first) and experiment spans;
    each part missing from them is the engine kind's guess."""
    guess = GUESSES[kind]
    parts = Parts.of(history[:HISTORY_RUNS])
    tokens = planned_tokens(workload)
    tok_s = guess.output_tok_s
    if parts.tok_s:
        tok_s = sum(t for t, _ in parts.tok_s) / sum(s for _, s in parts.tok_s)
    warmup_s = workload.warmups * workload.output_len / tok_s
    start = _mean(parts.warm) if parts.warm else _mean(parts.starts)
    cold = _mean(parts.cold) if parts.cold and parts.warm else None
    rest = _mean(parts.rests)
    outside = [
        x
        for s in spans
        if (
            x := in_range(
                max(0.0, (span_s(s.get("started_at"), s.get("first_run_at")) or 0.0))
                + max(0.0, (span_s(s.get("last_run_end"), s.get("finished_at")) or 0.0)),
                0.0,
                MAX_PART_S,
            )
        )
        is not None
    ]
    n = parts.count
    basis = f"from {n} earlier run{'s' if n != 1 else ''} of this engine"
    if n == 0:
        basis = "no runs of this engine yet: a guess"
    return Costs(
        start_s=guess.start_s if start is None else start,
        load_s=tokens / tok_s,
        rest_s=guess.rest_s + warmup_s if rest is None else rest,
        experiment_s=statistics.median(outside) if outside else guess.experiment_s,
        basis=basis,
        measured_runs=n,
        source="" if n else guess.source,
        ignored=parts.ignored,
        cold_start_s=cold,
        switch_s=_mean(parts.switches),
    )


def blend(costs: Costs, own: Sequence[Mapping[str, Any]]) -> Costs:
    """`costs` with each part this experiment's finished runs measured replaced by their mean."""
    parts = Parts.of([r for r in own if r.get("status") == "done"])
    if parts.count == 0:
        return costs
    # Its later starts are warm (each configuration compiled at its first): its own warm starts,
    # else the history's warm start where the history tells them apart, else its own starts.
    start = _mean(parts.warm) or (None if costs.cold_start_s else _mean(parts.starts))
    load, rest = _mean(parts.loads), _mean(parts.rests)
    switch = _mean(parts.switches)
    n = parts.count
    return replace(
        costs,
        start_s=costs.start_s if start is None else start,
        load_s=costs.load_s if load is None else load,
        rest_s=costs.rest_s if rest is None else rest,
        switch_s=costs.switch_s if switch is None else switch,
        basis=f"from this experiment's {n} finished run{'s' if n != 1 else ''}",
        measured_runs=n,
        source="",
        ignored="; ".join(x for x in (costs.ignored, parts.ignored) if x),
    )


# -- estimates ------------------------------------------------------------------------------------
def runs_seconds(
    costs: Costs, runs: int, restart: bool, experiments: int = 1, cold: int = 0, values: int = 1
) -> float:
    """Seconds of `runs` runs of `values` values over `experiments` experiments; without a
    restart per run, one start per experiment; `cold` of the starts compile anew; where the
    repeats switch resident servers, the runs that switch pay a switch, not a start."""
    starts = runs if restart else min(runs, experiments)
    switches = sw.switches_in(runs, values, costs.switch_every) if restart else 0
    starts -= switches
    return (
        experiments * costs.experiment_s
        + starts * costs.start_s
        + min(cold, starts) * costs.cold_extra_s()
        + switches * costs.switch_cost()
        + runs * (costs.load_s + costs.rest_s)
    )


def for_experiment(
    costs: Costs,
    values: int,
    repeats: int,
    restart: bool = True,
    *,
    max_repeats: int | None = None,
    budget_minutes: float | None = None,
    stored: int = 0,
    cold: int = 0,
) -> Estimate:
    """values x repeats runs (less `stored` finished ones, on resume); with `max_repeats`
    (`--repeats auto`, `repeats` its first rounds) also the most it may take: every value to
    max_repeats, or what the budget affords. `cold`: the configurations whose first start here
    compiles anew (each compiles once; the later starts are warm)."""
    runs = max(0, values * repeats - stored)
    cold = cold if costs.cold_extra_s() else 0
    seconds = runs_seconds(costs, runs, restart, cold=cold, values=values)
    notes = [f"{stored} finished run(s) kept"] if stored else []
    if restart and (switching := sw.switches_in(runs, values, costs.switch_every)):
        notes.append(f"{switching} of them switch resident servers instead of restarting")
    if cold:
        notes.append(
            f"{cold} configuration{'s' if cold != 1 else ''} not compiled here yet: "
            f"{'its' if cold == 1 else 'each'} first start counted cold"
        )
    note = "; ".join(notes)
    if max_repeats is None:
        return Estimate("experiment", runs, seconds, costs, note=note)
    most = max(runs, values * max(max_repeats, repeats) - stored)
    if budget_minutes is not None:  # the first rounds always run; then what the budget affords
        per_run = max(costs.run_s(restart), 1e-9)  # the budget is the whole experiment's:
        whole = int(max(0.0, budget_minutes * 60.0 - costs.experiment_s) // per_run)
        fits = max(0, whole - stored)  # the finished runs of a resumed one spent part of it
        if fits < most:
            most = max(runs, fits)
            unit = "run" if fits == 1 else "runs"
            note = "; ".join([f"a budget of {budget_minutes:g} min allows about {fits} {unit}"])
            note = "; ".join([note, *notes])
    return Estimate(
        "experiment",
        runs,
        seconds,
        costs,
        most,
        runs_seconds(costs, most, restart, cold=cold, values=values),
        note,
    )


def for_search(costs: Costs, budget_runs: int, stored: int = 0) -> Estimate:
    """A search runs at most `budget_runs` steps (less `stored` ones, found again on resume),
    each a one-run experiment of its own (a start and a stop each)."""
    runs = max(0, budget_runs - stored)
    note = f"{stored} run(s) stored, not run again; it may stop earlier" if stored else ""
    return Estimate(
        "search",
        runs,
        runs_seconds(costs, runs, True, experiments=runs),
        costs,
        note=note or "it may converge in fewer",
    )


def for_plan(costs: Costs, params: int, budget_runs: int, confirm_repeats: int) -> Estimate:
    """A plan: one search per parameter, then start vs recommended `confirm_repeats` a side,
    each run a one-run experiment."""
    runs = params * budget_runs + 2 * confirm_repeats
    return Estimate(
        "plan",
        runs,
        runs_seconds(costs, runs, True, experiments=runs),
        costs,
        note="searches may converge in fewer; what is stored is not run again",
    )


# -- from the store -------------------------------------------------------------------------------
def _engine_id(engine: Mapping[str, Any] | None, base_url: Any, model: Any) -> tuple[Any, ...]:
    """What makes two experiments' runs comparable in time: the same command and model (or, for
    an attached server, the same URL and model)."""
    if engine:
        return ("engine", tuple(engine.get("command") or ()), engine.get("model"))
    return ("attached", base_url, model)


def engine_costs(
    db: Database,
    engine: Mapping[str, Any] | None,
    workload: Workload,
    *,
    base_url: str | None = None,
    model: str | None = None,
    exclude_experiment: int | None = None,
) -> Costs:
    """The model for `engine` (an EngineSpec's JSON; None for an attached server) and `workload`
    from this DB's earlier runs of the same engine on this machine."""
    history = [
        row
        for row in _this_engine(db, timings.done_run_timings(db), engine, base_url, model)
        if exclude_experiment is None or row["experiment_id"] != exclude_experiment
    ]
    ids = list(dict.fromkeys(int(r["experiment_id"]) for r in history))[:HISTORY_EXPERIMENTS]
    spans = timings.experiment_spans(db, ids)
    return costs_from(history, spans, workload, engine_kind(engine))


def _this_engine(
    db: Database,
    rows: Sequence[Mapping[str, Any]],
    engine: Mapping[str, Any] | None,
    base_url: str | None,
    model: str | None,
) -> list[Mapping[str, Any]]:
    """The rows of the same engine (its command and model; an attached server: its URL and
    model) on this machine: a run stored with other hardware ran elsewhere (a DB carried from
    another box), its times are not this machine's."""
    want = _engine_id(engine, base_url, model if engine is None else None)
    here = hardware.hardware_details()["summary"] if engine else None
    kept = []
    for row in rows:
        try:
            row_engine = json.loads(row["engine_json"]) if row.get("engine_json") else None
        except ValueError:
            continue
        got = _engine_id(
            row_engine, row.get("base_url"), row.get("model") if not row_engine else None
        )
        elsewhere = here is not None and row.get("hardware") not in (None, here)
        if got == want and not elsewhere:
            kept.append(row)
    return kept


def cold_configs(db: Database, exp: Mapping[str, Any]) -> int:
    """How many of the experiment's configurations no server of this engine has started with on
    this machine yet (the experiment's own runs count): each compiles at its first start."""
    from tuning.experiment.run_unit import run_inputs

    engine = exp.get("engine")
    if not engine:
        return 0
    started = _this_engine(db, timings.started_configs(db), engine, None, None)
    seen = {str(r.get("config_json")) for r in started}
    wanted = set()
    for value in exp.get("values") or ():
        config, _, _ = run_inputs(dict(exp), value)
        wanted.add(json.dumps(config, sort_keys=True, default=str))
    return len(wanted - seen)


def restarts(exp: Mapping[str, Any]) -> bool:
    """Whether each run of the stored experiment starts its own server."""
    from tuning.experiment.run_unit import param_of

    return bool(exp.get("engine")) and param_of(dict(exp)).restarts_server


def with_switches(db: Database, exp: Mapping[str, Any], costs: Costs) -> Costs:
    """`costs` with the restart rhythm of the repeats that switch resident servers."""
    return replace(costs, switch_every=sw.switch_every(db, exp), switch_paused=sw.pauses(exp))


def costs_of(db: Database, exp: Mapping[str, Any]) -> Costs:
    """The model for a stored experiment, from the engine's earlier runs (not its own)."""
    return engine_costs(
        db,
        exp.get("engine"),
        Workload.from_dict(exp["workload"]),
        base_url=exp.get("base_url"),
        model=exp.get("model"),
        exclude_experiment=int(exp["id"]),
    )


def of_experiment(db: Database, exp: Mapping[str, Any]) -> Estimate:
    """The estimate of a planned experiment, as printed before it starts."""
    values = len(exp.get("values") or [])
    repeats = int(exp.get("repeats") or 1)
    own = timings.experiment_run_timings(db, int(exp["id"]))
    costs = blend(costs_of(db, exp), own)  # a resumed experiment: its own runs say best
    stored = sum(finished(r) for r in own)  # a resumed experiment never runs these again
    if exp.get("fleet"):
        costs = replace(
            costs, basis=f"{costs.basis}, one after another (the fleet runs them in parallel)"
        )
    cold = cold_configs(db, exp) if costs.cold_start_s else 0
    costs = with_switches(db, exp, costs)  # the repeats that switch resident servers
    if not exp.get("repeats_auto"):
        return for_experiment(costs, values, repeats, restarts(exp), stored=stored, cold=cold)
    budget = exp.get("budget_minutes")
    return for_experiment(
        costs,
        values,
        repeats,
        restarts(exp),
        max_repeats=int(exp.get("max_repeats") or repeats),
        budget_minutes=float(budget) if budget else None,
        stored=stored,
        cold=cold,
    )


def seconds_left(db: Database, exp: Mapping[str, Any]) -> float | None:
    """What an experiment still needs by the model, its own finished runs replacing the earlier
    runs' numbers; None when there is nothing to say (no runs planned; the fleet, where runs go
    in parallel). The run in flight counts what it has left."""
    total, done = int(exp.get("runs_total") or 0), int(exp.get("runs_done") or 0)
    if total <= 0 or exp.get("fleet") or not exp.get("workload"):  # fleet runs go in parallel
        return None
    own = timings.experiment_run_timings(db, int(exp["id"]))
    costs = with_switches(db, exp, blend(costs_of(db, exp), own))
    restart = restarts(exp)
    left = max(0, total - done)
    starts = left if restart else (1 if not any(r.get("time_to_healthy_s") for r in own) else 0)
    values = len(exp.get("values") or []) or 1
    switches = sw.switches_in(left, values, costs.switch_every) if restart else 0
    seconds = costs.experiment_s + (starts - switches) * costs.start_s
    seconds += switches * costs.switch_cost() + left * (costs.load_s + costs.rest_s)
    current = exp.get("current_run_id")
    running = [r for r in own if r["id"] == current and r.get("status") == "running"]
    if running and left:
        seconds -= min(costs.run_s(restart), max(0.0, age_s(running[0].get("started_at"))))
    return max(0.0, seconds)


def left_text(db: Database, exp: Mapping[str, Any]) -> str:
    """'about 3 min left', or '' when nothing is left to estimate."""
    seconds = seconds_left(db, exp)
    return "" if seconds is None else f"{about(seconds)} left"


def experiment_line(db: Database, experiment_id: int) -> Estimate:
    """The estimate of stored experiment `experiment_id`."""
    return of_experiment(db, queries.get_experiment(db, experiment_id))
