"""Resident engines on a CPU vLLM (issue 38, item 4), end to end on the fake vLLM run as a CPU
engine: an until-decided experiment of max-num-seqs starts each value's server once (plus a real
restart every third round) and switches them by pausing the one in hand (SIGSTOP, its load
drained) and continuing the other; while a run measures, every parked server is `stopped` and
the one serving is not; each run's anatomy still adds up, with a `switch` part; the servers run
the values' own configuration (no sleep mode, no dev endpoints, no KV budget added). Cancelling
mid-experiment leaves no process; a flag that sizes memory and too little RAM for a second
server fall back to restarts and say why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psutil
import pytest

from store import connect, queries
from tests.fakes.engines import fake_spec
from tuning.engine.procs import pid_alive
from tuning.experiment import run_unit
from tuning.experiment.measure import measure as real_measure
from tuning.experiment.plan import plan_experiment
from tuning.experiment.repeats import AutoRepeats
from tuning.experiment.run_anatomy import adds_up
from tuning.experiment.runner import run_experiment
from tuning.experiment.spec import ExperimentSpec
from tuning.measure.traffic.workload import Workload

QUICK = Workload(num_requests=12, concurrency=2, input_len=8, output_len=8, num_warmups=1)
PACE = "ttft_ms=20,itl_ms=2"


class Watch:
    """Wraps the run's measurement: what every server's status was while each run measured."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cancel_at: int | None = None) -> None:
        self.seen: list[dict[str, Any]] = []
        self.pids: set[int] = set()
        self.cancel_at = cancel_at

        def measure(unit: Any, *args: Any, **kwargs: Any) -> int:
            self.look(unit)
            if self.cancel_at is not None and len(self.seen) >= self.cancel_at:
                raise KeyboardInterrupt  # Ctrl-C while a run measures, a server paused
            return int(real_measure(unit, *args, **kwargs))

        monkeypatch.setattr(run_unit, "measure", measure)

    def look(self, unit: Any) -> None:
        resident = unit.resident
        parked = {label: p.server.pid for label, p in (resident.pool if resident else {}).items()}
        serving = unit.server.pid if unit.server else None
        self.pids.update(pid for pid in [serving, *parked.values()] if pid)

        def status(pid: int | None) -> str:
            return psutil.Process(pid).status() if pid else "none"

        self.seen.append(
            {
                "serving": status(serving),
                "parked": {label: status(pid) for label, pid in parked.items()},
            }
        )


def _run(
    home: Path,
    values: Any = (2, 16),
    param: str = "max-num-seqs",
    auto: AutoRepeats | None = None,
    repeats: int = 2,
    resident: str = "auto",
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    db_path = home / "lab.db"
    spec = ExperimentSpec.build(
        param=param,
        values=list(values),
        repeats=repeats,
        auto=auto,
        workload=QUICK,
        engine=fake_spec(PACE, backend="cpu"),
        resident=resident,
    )
    exp_id = plan_experiment(db_path, spec)
    try:
        run_experiment(db_path, exp_id, start_timeout=60)
    finally:
        with connect(db_path, readonly=True) as db:
            exp = queries.get_experiment(db, exp_id)
            runs = queries.list_runs(db, exp_id, include_hidden=True)
            _run.last = (exp, runs)  # type: ignore[attr-defined]
    return exp, runs


def _keys(run: dict[str, Any]) -> list[str]:
    return [p["key"] for p in run["anatomy"]["parts"]]


def test_until_decided_pauses_resident_servers_instead_of_restarting(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = Watch(monkeypatch)
    exp, runs = _run(lab_home, auto=AutoRepeats(max_repeats=4))
    state = exp["resident"]
    assert state["used"] is True and state["parked"] == "paused", state
    assert len(runs) >= 4 and all(r["status"] == "done" for r in runs)
    modes = [r["startup"].get("resident") or "restart" for r in runs]
    wanted = ["start" if r["repeat_index"] % 3 == 0 else "switch" for r in runs]
    if state.get("fallback"):  # the check found a difference on a busy machine: restarts after
        assert state["fallback"].startswith("the check: ")
        # (when it falls back after the last run, no run restarted after it)
        fell = modes.index("restart") if "restart" in modes else len(modes)
        modes, wanted = modes[:fell], wanted[:fell]
    assert modes == wanted, modes
    # Each value's server started once, plus the real restarts every third round (no probe).
    assert sum("start" in _keys(r) for r in runs) == modes.count("start") + (len(runs) - len(modes))
    assert state["switches"] == modes.count("switch") >= 2
    for run, seen in zip(runs, watch.seen, strict=True):
        assert adds_up(run["anatomy"]), run["anatomy"]
        assert "kv_probe" not in _keys(run)
        # the value's own configuration: no sleep mode, no dev endpoints, no budget added
        assert "--enable-sleep-mode" not in run["argv"]
        assert "VLLM_SERVER_DEV_MODE" not in run["env"]
        assert run["config"] == {"max-num-seqs": int(run["value"])}
        # while it measured, the one serving ran and every parked one was paused
        assert seen["serving"] not in ("stopped", "none"), seen
        assert all(s == psutil.STATUS_STOPPED for s in seen["parked"].values()), seen
        if run["startup"].get("resident") == "switch":
            assert "switch" in _keys(run) and "start" not in _keys(run) and "stop" not in _keys(run)
            assert run["startup"]["parked"] == "paused" and run["time_to_healthy_s"] is None
            assert seen["parked"], "a switched run with no server parked"
    assert any(seen["parked"] for seen in watch.seen)
    assert state["asleep"] == [] and not [p for p in watch.pids if pid_alive(p)]
    assert state["check"]["values"], state["check"]


def test_cancel_mid_experiment_leaves_no_process(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watch = Watch(monkeypatch, cancel_at=3)  # the third run: a switch, the other value paused
    with pytest.raises(KeyboardInterrupt):
        _run(lab_home, repeats=3)
    exp, _ = _run.last  # type: ignore[attr-defined]
    assert exp["status"] == "cancelled"
    assert any(s == psutil.STATUS_STOPPED for s in watch.seen[-1]["parked"].values()), watch.seen
    assert watch.pids and not [p for p in watch.pids if pid_alive(p)]
    assert exp["resident"]["asleep"] == []


@pytest.mark.parametrize(
    "param,values", [("VLLM_CPU_KVCACHE_SPACE", (1, 2)), ("block-size", (16, 32))]
)
def test_a_flag_that_sizes_memory_restarts_and_says_why(
    lab_home: Path, param: str, values: tuple[int, int]
) -> None:
    exp, runs = _run(lab_home, param=param, values=values)
    state = exp["resident"]
    assert state["used"] is False and f"{param} sizes the engine's memory" in state["why_not"]
    assert all("start" in _keys(r) for r in runs) and len(runs) == 4
    with pytest.raises(ValueError, match=f"--resident on: {param} sizes"):
        _run(lab_home, param=param, values=values, resident="on")


def test_too_little_ram_for_a_second_server_falls_back_with_numbers(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tuning.engine.pause.available_ram", lambda: 2**20)  # 1 MiB left
    exp, runs = _run(lab_home)
    state = exp["resident"]
    assert state["fallback"].startswith("RAM for a second server: 0.00 GiB available")
    assert state["ram"]["available_bytes"] == 2**20 and state["ram"]["first_rss_bytes"] > 2**20
    assert [r["status"] for r in runs] == ["done"] * 4
    assert all("start" in _keys(r) and "switch" not in _keys(r) for r in runs)
    assert all(adds_up(r["anatomy"]) for r in runs)
    assert state["switches"] == 0 and state["asleep"] == []


def test_resident_on_is_accepted_for_a_cpu_vllm() -> None:
    """`--resident on` used to refuse every CPU engine ("sleep mode needs CUDA")."""
    spec = ExperimentSpec.build(
        param="max-num-seqs",
        values=[2, 16],
        repeats=2,
        workload=QUICK,
        engine=fake_spec(backend="cpu"),
        resident="on",
    )
    assert spec.resident == "on"


def test_a_server_whose_load_does_not_drain_is_not_paused_and_falls_back(
    lab_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tuning.engine import pause

    def stuck(base_url: str, timeout: float = 0.0) -> float:
        raise pause.PauseError("2 request(s) still in flight 10 s after its load")

    monkeypatch.setattr(pause, "drain", stuck)
    exp, runs = _run(lab_home)
    state = exp["resident"]
    assert state["fallback"] == "pausing failed: 2 request(s) still in flight 10 s after its load"
    assert [r["status"] for r in runs] == ["done"] * 4
    assert all("switch" not in _keys(r) for r in runs) and state["switches"] == 0
    assert all(adds_up(r["anatomy"]) for r in runs)
