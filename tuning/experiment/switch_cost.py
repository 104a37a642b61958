"""What a run that switches resident servers costs in an estimate (issue 38, items 4 and 7): the
estimate before an experiment and the until-decided budget (tuning.experiment.estimate and
repeats) count a switch (sleep the server in hand, wake the value's) where its runs will switch,
not a restart.

Which runs switch follows the runner (tuning.experiment.resident): each value's repeats 0, 3, 6,
... start a server anew, the others switch. A switch's seconds are the machine's own: the mean
`switch` part of this engine's switched runs (tuning.experiment.run_parts), else the cost known
from the issue's probe on an H100 (0.12-0.13 s a switch), said as such; on a CPU vLLM (whose
servers are paused, tuning.engine.pause) a stated guess, 0.05 s, until it has measured its own.

Whether an experiment will switch is the runner's state once it has decided (`resident_json`:
used and not fallen back); before its first run, the conditions the runner checks, with the
engine's flags from the store's cache only (an estimate never starts a process): a vLLM whose
flags were never read here has sleep mode when its stored version says so, as the runner takes it
(tuning.experiment.resident_when), and is taken to restart otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sqlite_utils import Database

RESTART_EVERY = 3  # a value's repeat 0, 3, 6, ... starts its server anew (the runner's rhythm)
SWITCH_GUESS_S = 0.13
SWITCH_SOURCE = "a switch's known cost: 0.12-0.13 s (sleep one, wake the other, on an H100)"
PAUSE_GUESS_S = 0.05
PAUSE_SOURCE = (
    "a guess for a CPU vLLM, not measured here yet: 0.05 s (pause one, continue the other, "
    "one /health)"
)


def switches_in(runs: int, values: int, every: int) -> int:
    """How many of `runs` runs spread over `values` values (repeats in order, from the first)
    switch when every `every`-th repeat of a value restarts (0: none switch)."""
    if every < 2 or runs <= 0:
        return 0
    values = max(1, values)
    per, extra = divmod(runs, values)

    def of(k: int) -> int:
        return k - math.ceil(k / every)

    return (values - extra) * of(per) + extra * of(per + 1)


def run_s_at(costs: Any, repeat: int, restart: bool = True) -> float:
    """A run's wall time at repeat index `repeat` of its value (an estimate's Costs): a start where
    it restarts (a value's first run, and every `switch_every`-th where its repeats switch
    resident servers), a switch where it switches, no start without a restart."""
    if not restart:
        return float(costs.load_s + costs.rest_s)
    every = costs.switch_every
    switches = every >= 2 and repeat % every != 0
    return float((costs.switch_cost() if switches else costs.start_s) + costs.load_s + costs.rest_s)


def rounds_run_s(costs: Any, done: int, looks: tuple[int, ...], restart: bool = True) -> float:
    """The mean run's wall time over the rounds from repeat `done` to the next look (the budget's
    question: does what comes next fit?), knowing which of those repeats switch: on an H100 the
    mean over a long experiment (a third of the runs starting) called a round of switches 2 min
    with 60 s of the budget left, and the experiment stopped undecided."""
    target = next((n for n in looks if n > done), done + 1)
    return sum(run_s_at(costs, k, restart) for k in range(done, target)) / (target - done)


def switch_share(every: int) -> float:
    """The share of a long experiment's runs that switch (2/3 when every third restarts)."""
    return 0.0 if every < 2 else (every - 1) / every


def _flags_cached(db: Database, engine: Any) -> set[str] | None:
    """The engine's vLLM flags as the store's cache has them (its version's, else the newest read
    through its interpreter); when never read here, the sleep-mode flag alone where the version
    has it (as the runner assumes), else None."""
    from store import engine_flags
    from tuning.engine.flags.catalog import Catalog, engine_python
    from tuning.engine.sleep_mode import SLEEP_FLAG, sleep_flag_by_version

    try:
        python = engine_python(engine.command)
        version = engine.vllm_version
        raw = None
        if version and version != "unknown":
            raw = engine_flags.load_version(db, version, python)
        raw = raw or engine_flags.load_newest(db, python)
        if raw is not None:
            return set(Catalog.from_dict(raw).flags)
    except Exception:  # noqa: BLE001 (a store without the cache, a malformed one: unknown)
        pass
    return {SLEEP_FLAG} if sleep_flag_by_version(getattr(engine, "vllm_version", None)) else None


def will_switch(db: Database, exp: Mapping[str, Any]) -> bool:
    """Whether the experiment's repeats switch resident servers (tuning.experiment.resident)."""
    state = exp.get("resident")
    state = state if isinstance(state, Mapping) else {}
    if "used" in state:  # the runner decided: used, unless it fell back since
        return bool(state.get("used")) and not state.get("fallback")
    from tuning.engine.params import ParamError, get_param
    from tuning.engine.sleep_mode import why_not
    from tuning.engine.spec import EngineSpec

    if str(state.get("asked") or "auto") == "off" or exp.get("fleet"):
        return False
    if not exp.get("repeats_auto") and int(exp.get("repeats") or 1) < 2:
        return False
    data = exp.get("engine")  # as tuning.experiment.run_unit reads it (which imports this)
    try:
        engine = EngineSpec(**data) if data else None
        param = get_param(exp["param"], engine.learned_params() if engine else None)
    except (ParamError, TypeError, KeyError):
        return False
    if engine is None or not param.restarts_server:
        return False
    return why_not(param.name, engine.backend, _flags_cached(db, engine)) is None


def spec_experiment(spec: Any) -> dict[str, Any]:
    """What `will_switch` reads of an experiment, from an ExperimentSpec not stored yet (New
    experiment's estimate before Start)."""
    return {
        "engine": spec.engine.to_json() if spec.engine else None,
        "param": spec.param.name,
        "repeats": spec.first_rounds,
        "repeats_auto": spec.auto is not None,
        "resident": {"asked": spec.resident},
    }


def switch_every(db: Database, exp: Mapping[str, Any]) -> int:
    """Every how many repeats a value restarts where the experiment's repeats will switch
    resident servers (the estimate's `Costs.switch_every`); 0 where every run restarts."""
    return RESTART_EVERY if will_switch(db, exp) else 0


def pauses(exp: Mapping[str, Any]) -> bool:
    """Whether the experiment's resident servers would be paused (a CPU vLLM), not put to sleep."""
    engine = exp.get("engine")
    return isinstance(engine, Mapping) and engine.get("backend") == "cpu"


def guess_s(paused: bool) -> float:
    """A switch's seconds before this engine has measured one."""
    return PAUSE_GUESS_S if paused else SWITCH_GUESS_S


def switch_words(costs: Any) -> str:
    """'; a switch 0.13 s (...) for the repeats that switch resident servers (...)', the words of
    an estimate's costs (tuning.experiment.estimate.Costs) for it; '' where every run restarts."""
    every = costs.switch_every
    if not every:
        return ""
    source = PAUSE_SOURCE if costs.switch_paused else SWITCH_SOURCE
    how = "measured here" if costs.switch_s is not None else source
    return (
        f"; a switch {costs.switch_cost():.2f} s ({how}) for the repeats that switch resident "
        f"servers (a real restart every {every} repeats of a value)"
    )
