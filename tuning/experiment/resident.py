"""Resident engines for repeats (issue 38, item 4), the experiment's side: each value's server is
started once with sleep mode and one shared KV budget, and the repeats switch them (sleep the one
in hand, wake the one asked for) instead of restarting; a real restart every `RESTART_EVERY`
rounds gives the restart side of the check (tuning.experiment.resident_check).

Whether an experiment may run resident is decided once, at its first run, and said once: asked
(`--resident auto|on|off`, `experiments.resident_json.asked`), repeats to switch (until decided
or N >= 2), a parameter that restarts the server and does not size memory, on CUDA, with a vLLM
whose parser has `--enable-sleep-mode` (tuning.engine.sleep_mode.why_not). The shared budget is
the baseline's `kv-cache-memory-bytes` when set, else `KV_SHARE` of what a first sleep-mode start
measured (that start is a part of the first run's anatomy, `kv_probe`, and is stopped).

Never two awake: a server is asleep (its device memory freed) before another starts or wakes.
The experiment falls back to restarts, saying why once (stored in `resident_json.fallback`),
when sleep or wake fails, when a woken server's KV capacity is not its fresh start's, or when
the check finds switched runs differ from restarted ones; it keeps the resident configuration
(the budget, sleep mode) so its runs stay one configuration.

On a CPU vLLM (no sleep mode) a resident server is paused instead (tuning.engine.pause: its load
drained, its process group SIGSTOPped; woken by SIGCONT and one /health): a paused server uses no
CPU, so only the server in hand runs. Its configuration is the value's own (no budget, no probe,
no sleep-mode flag); a paused server keeps its RAM, so before a value's first server starts
beside a paused one the RAM available is compared with the one in hand's (`pause.why_short`),
and the experiment falls back with the numbers when it is short. `resident_json.parked` says
which way ("asleep" or "paused").
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Protocol

from core.plausible import count
from store import queries, repo
from tuning.compare.primaries import Primaries
from tuning.compare.resident_words import QUIET, check_line
from tuning.engine import effective
from tuning.engine import pause as pausing
from tuning.engine.launch import Launch
from tuning.engine.params import Param, format_value
from tuning.engine.server import ServerProcess, http_get, parse_cache_config
from tuning.engine.sleep_mode import (
    SLEEP_FLAG,
    SleepMode,
    SleepModeError,
    kv_after_wake,
    resident_env,
)
from tuning.engine.spec import EngineSpec
from tuning.experiment.bookkeeping import Bookkeeping
from tuning.experiment.resident_check import resident_check
from tuning.experiment.resident_when import why_not_resident
from tuning.experiment.run_anatomy import RunClock
from tuning.experiment.sampling import RunSamples
from tuning.experiment.switch_cost import RESTART_EVERY  # the estimate counts the same rhythm
from tuning.measure.telemetry.gpu import GpuSampler, read_gpu_used
from tuning.measure.telemetry.proctree import ProcessTreeSampler
from tuning.measure.telemetry.prom import MetricsSampler

KV_SHARE = 0.9  # of a first start's KV budget: what two servers, one asleep, both fit
KV_BUDGET = "kv-cache-memory-bytes"
FLAGS_WAIT_S = 120.0  # the most a first switch waits for the flags read beside the first start


def probed_kv_bytes(facts: dict[str, Any]) -> int | None:
    """The KV budget a start measured: vLLM's cache config when the budget was asked
    (`kv_cache_memory_bytes`), else its log's "Available KV cache memory: N GiB", which is all a
    start sized by `--gpu-memory-utilization` says (vLLM 0.25 on an H100 leaves the label empty)."""
    asked = count(facts.get("kv_cache_memory_bytes"))
    if asked:
        return asked
    gib = facts.get("kv_cache_memory_gib")
    return int(float(gib) * 2**30) if isinstance(gib, int | float) and gib > 0 else None


class ResidentUnit(Protocol):
    """What resident engines use of tuning.experiment.run_unit.RunUnit (which imports this)."""

    book: Bookkeeping
    clock: RunClock
    samples: RunSamples
    server: ServerProcess | None
    server_facts: dict[str, Any]
    server_check: effective.Check | None
    server_t0: float
    gpu_baseline: dict[str, int]

    def start_fresh(
        self, run_id: int, launch: Launch, engine: EngineSpec, part: str = "start"
    ) -> tuple[str, float]: ...
    def stop_server(self) -> None: ...
    def store_server_facts(self, run_id: int, reused: bool) -> None: ...


@dataclass
class Parked:
    """A resident server asleep, with what its fresh start said."""

    server: ServerProcess
    facts: dict[str, Any]
    check: effective.Check | None


def kv_tokens_now(base_url: str) -> int | None:
    """The KV capacity the server reports now (`vllm:cache_config_info`: its tokens, else its
    blocks x block size); None when it does not say."""
    try:
        status, text = http_get(base_url.rstrip("/") + "/metrics", timeout=5.0)
    except OSError:
        return None
    if status != 200:
        return None
    labels = parse_cache_config(text)

    def number(key: str) -> int | None:
        try:
            return count(float(labels[key]))
        except (KeyError, ValueError):
            return None

    tokens = number("kv_cache_size_tokens")
    blocks, size = number("num_gpu_blocks"), number("block_size")
    return tokens if tokens is not None else (blocks * size if blocks and size else None)


def sleep_mode_launch(launch: Launch) -> Launch:
    """`launch` with vLLM's sleep mode and its dev endpoints (a flag the lab adds itself, not a
    tuned parameter: it is not in the run's configuration, its argv says it)."""
    argv = [*launch.argv, "--" + SLEEP_FLAG]
    return replace(launch, argv=argv, env={**launch.env, **resident_env()})


def _budget_of(value: Any) -> int | None:
    try:
        budget = int(value)
    except (TypeError, ValueError):
        return None
    return budget if budget > 0 else None


class ResidentEngines:
    """The resident servers of one experiment's runs and what was decided about them."""

    def __init__(self, book: Bookkeeping, engine: EngineSpec | None, param: Param) -> None:
        self.book = book
        self.state: dict[str, Any] = dict(book.exp.get("resident") or {})
        self.state.setdefault("asked", "auto")
        why, self.flags_read = why_not_resident(book.exp, engine, param, book.db_path)
        self.engine = engine
        self.active = why is None
        self.budget: int | None = None
        self.pool: dict[str, Parked] = {}
        self.awake: str | None = None  # the label of the server in hand (unit.server)
        self.fresh_kv: dict[str, int | None] = {}
        self.unit: ResidentUnit | None = None
        self.gpu_before: dict[str, int] | None = None  # device memory before any server slept
        # A CPU vLLM's servers are paused (tuning.engine.pause), a GPU vLLM's put to sleep.
        self.pausing = engine is not None and engine.backend == "cpu"
        if self.active and self.pausing:
            self.state.update(used=True, restart_every=RESTART_EVERY, parked="paused")
            self.state.update(
                switches=self.state.get("switches", 0), starts=self.state.get("starts", 0)
            )
        elif self.active:
            self.state["parked"] = "asleep"
            self.budget = _budget_of((book.exp.get("config") or {}).get(KV_BUDGET))
            if self.budget is not None:
                self.state["budget_from"] = "the baseline's --set kv-cache-memory-bytes"
            elif (earlier := _budget_of(self.state.get("budget_bytes"))) is not None:
                self.budget = earlier  # a resumed experiment keeps the budget its runs had
            self.state.update(used=True, restart_every=RESTART_EVERY)
            self.state.update(  # a resumed experiment counts on
                switches=self.state.get("switches", 0), starts=self.state.get("starts", 0)
            )
        else:
            self.state.update(used=False, why_not=why)
            if self.state["asked"] != "off" and why not in QUIET:
                self._say(f"resident engines not used: {why}; every run restarts its server")
        self.state["budget_bytes"] = self.budget
        self._store()

    # -- what the runs launch -----------------------------------------------------------------
    def config_for(self, config: dict[str, Any]) -> dict[str, Any]:
        """A run's configuration: with the shared budget once there is one (kept after a fall
        back, so the experiment's runs stay one configuration)."""
        return config if self.budget is None else {**config, KV_BUDGET: self.budget}

    def launch_for(self, engine: EngineSpec, config: dict[str, Any]) -> Launch:
        """The run's launch: sleep mode on, its dev endpoints, the shared budget."""
        if self.budget is None:
            return engine.launch(config)
        return sleep_mode_launch(engine.launch(self.config_for(config)))

    # -- one run's server -----------------------------------------------------------------------
    def serve(
        self,
        unit: ResidentUnit,
        run_id: int,
        value: Any,
        repeat: int,
        config: dict[str, Any],
        engine: EngineSpec,
    ) -> tuple[str, float] | None:
        """The run's server, switched to or started resident; None once it falls back (the
        caller then restarts as for any run)."""
        label = format_value(value)
        self.unit = unit
        try:
            if self.pausing:
                pass  # the value's own configuration: no budget to measure
            elif self.budget is None and not self._probe(unit, run_id, config, engine):
                return None
            switching = not self.starts(value, repeat)
            if (why := self._flags_lack_sleep(wait=switching)) is not None:
                self.fall_back(why)
                return None
            if switching:
                return self._switch(unit, run_id, label)
            return self._start(unit, run_id, label, config, engine)
        except SleepModeError as exc:
            self.fall_back(f"sleep mode failed: {exc}")
            return None
        except pausing.PauseError as exc:
            self.fall_back(f"pausing failed: {exc}")
            return None

    def starts(self, value: Any, repeat: int) -> bool:
        """Whether the run at (value, repeat) starts a server, rather than switching to one
        parked (a value's first run, and its real restart every `RESTART_EVERY` repeats)."""
        label = format_value(value)
        return not (repeat % RESTART_EVERY and (label in self.pool or self.awake == label))

    def _flags_lack_sleep(self, wait: bool) -> str | None:
        """Why not, when the flags read beside the first start show this vLLM has no sleep mode
        after all; None otherwise or while they are still read (`wait`: before a first switch,
        they are waited for)."""
        reading = self.flags_read
        if reading is None or self.engine is None:
            return None
        if wait:
            reading.join(FLAGS_WAIT_S)
        if reading.is_alive():
            return None
        self.flags_read = None
        from tuning.engine.learn import cached_catalog

        try:
            catalog = cached_catalog(self.book.db_path, self.engine)
        except Exception:  # noqa: BLE001 (a start with the flag worked: nothing to undo)
            return None
        if catalog is not None and SLEEP_FLAG not in catalog.flags:
            return f"this vLLM has no --{SLEEP_FLAG}"
        return None

    def _probe(
        self, unit: ResidentUnit, run_id: int, config: dict[str, Any], engine: EngineSpec
    ) -> bool:
        """The shared KV budget from a first sleep-mode start's measured KV (then stopped)."""
        asked = {k: v for k, v in config.items() if k != KV_BUDGET}
        launch = sleep_mode_launch(engine.launch(asked))
        unit.start_fresh(run_id, launch, engine, part="kv_probe")
        measured = probed_kv_bytes(unit.server_facts)
        if unit.server is not None:  # its log, its engine's pids: the run's own start follows
            self.state["probe"] = {
                "log_path": str(unit.server.log_path),
                "engine_pids": unit.server_facts.get("engine_pids") or {},
            }
        unit.clock.mark("stop")
        unit.stop_server()
        if not measured:
            self.fall_back("the first sleep-mode start did not say its KV budget")
            return False
        self.budget = int(measured * KV_SHARE)
        self.state["budget_bytes"] = self.budget
        self.state["budget_from"] = (
            f"{KV_SHARE:.0%} of the {measured:,} bytes a first sleep-mode start measured"
        )
        return True

    def _park(self, unit: ResidentUnit) -> float:
        """Put the server in hand to sleep (or pause it) and keep it; the seconds it took."""
        server = unit.server
        if server is None or self.awake is None:
            return 0.0
        if self.pausing:
            return self._pause(unit, server)
        slept = SleepMode(server.launch.base_url).sleep()
        unit.samples.finish()
        self.pool[self.awake] = Parked(server, dict(unit.server_facts), unit.server_check)
        unit.server, self.awake = None, None
        # What the servers asleep still hold (vLLM keeps its CUDA context and graph pool) is the
        # device's new floor: a restart waits for its own memory only, not for theirs.
        if self.gpu_before is None:
            self.gpu_before = dict(unit.gpu_baseline)
        unit.gpu_baseline = read_gpu_used() or unit.gpu_baseline
        return slept

    def _pause(self, unit: ResidentUnit, server: ServerProcess) -> float:
        """Drain the server in hand, end its samplers (none may poll a paused server), pause its
        group and keep it; the seconds it took."""
        t0 = time.monotonic()
        pausing.drain(server.launch.base_url)
        unit.samples.finish()
        pausing.pause(server.pgid or 0)
        self.pool[str(self.awake)] = Parked(server, dict(unit.server_facts), unit.server_check)
        unit.server, self.awake = None, None
        return time.monotonic() - t0

    def _room_for(self, unit: ResidentUnit, label: str) -> bool:
        """Whether a value's first server fits in RAM beside the paused ones (the one in hand's
        process-tree RSS, with a margin, against the RAM available now); falls back when not."""
        server = unit.server
        if not self.pausing or server is None or self.awake == label or label in self.pool:
            return True
        rss = pausing.tree_rss(server.pid or 0)
        available = pausing.available_ram()
        self.state["ram"] = {"first_rss_bytes": rss, "available_bytes": available}
        why = pausing.why_short(rss, available)
        if why is not None:
            self.fall_back(why)
            return False
        return True

    def _start(
        self,
        unit: ResidentUnit,
        run_id: int,
        label: str,
        config: dict[str, Any],
        engine: EngineSpec,
    ) -> tuple[str, float] | None:
        """A fresh start of the value's resident server, the others asleep (paused) first; None
        when it falls back (no RAM for it beside a paused one)."""
        if not self._room_for(unit, label):
            return None
        if unit.server is not None and self.awake != label:
            unit.clock.mark("pause" if self.pausing else "sleep")
            self._park(unit)
        old = self.pool.pop(label, None)
        if old is not None:  # its real restart: the sleeping one goes first
            unit.clock.mark("stop")
            old.server.stop()
        launch = self.launch_for(engine, config)
        repo.update_run(self.book.db, run_id, config_json=self.config_for(config))
        got = unit.start_fresh(run_id, launch, engine)
        self.awake = label
        if not self.pausing:  # a paused server's KV cache stays as it is
            # at the address it serves: one spawned ahead has a port of its own, not `launch`'s
            self.fresh_kv[label] = kv_tokens_now(got[0])
        self.state["starts"] = int(self.state.get("starts") or 0) + 1
        self._mark_run(run_id, unit, {"resident": "start"})
        return got

    def _switch(self, unit: ResidentUnit, run_id: int, label: str) -> tuple[str, float] | None:
        """Sleep (pause) the server in hand, wake the value's: the run's `switch` part."""
        unit.clock.mark("switch")
        slept = self._park(unit)
        parked = self.pool[label]  # until it is awake: a fall back stops it with the rest
        if self.pausing:
            self._check_paused()
            woke = pausing.resume(parked.server.pgid or 0, parked.server.launch.base_url)
        else:
            woke = SleepMode(parked.server.launch.base_url).wake()
        del self.pool[label]
        unit.server, self.awake = parked.server, label
        unit.server_facts, unit.server_check = dict(parked.facts), parked.check
        unit.server_t0 = time.monotonic()
        if not self.pausing:
            woken = kv_tokens_now(parked.server.launch.base_url)
            fresh = self.fresh_kv.get(label)
            self.state["kv_after_wake"] = {"value": label, "fresh_tokens": fresh, "woken": woken}
            why = kv_after_wake(fresh, woken)
            if why is not None:
                self.fall_back(why)
                return None
        pid = parked.server.pid or 0
        unit.samples.start(
            run_id,
            unit.server_t0,
            [ProcessTreeSampler(pid, period=0.1), GpuSampler(pid, period=0.1)],
        )
        unit.samples.add(MetricsSampler(parked.server.launch.base_url, period=0.5))
        self.state["switches"] = int(self.state.get("switches") or 0) + 1
        unit.store_server_facts(run_id, reused=True)  # its fresh start's KV, on this run too
        times: dict[str, Any] = {"slept_s": round(slept, 3), "woke_s": round(woke, 3)}
        times["parked"] = "paused" if self.pausing else "asleep"
        self._mark_run(run_id, unit, {"resident": "switch", **times})
        return parked.server.launch.base_url, unit.server_t0

    def _check_paused(self) -> None:
        """Before a switch: every server parked is really paused (its leader `stopped`)."""
        for label, parked in self.pool.items():
            pid = parked.server.pid or 0
            if not pausing.is_stopped(pid):
                raise pausing.PauseError(f"the server of {label} (pid {pid}) is not paused")

    def _mark_run(self, run_id: int, unit: ResidentUnit, extra: dict[str, Any]) -> None:
        """How the run's server came to serve it, on the run (the check reads it)."""
        facts = {**unit.server_facts, "reused_server": extra["resident"] == "switch", **extra}
        columns: dict[str, Any] = {"startup_json": facts}
        server = unit.server
        if extra["resident"] == "switch" and server is not None:  # the woken server's command
            launch = server.launch
            columns.update(time_to_healthy_s=None, argv_json=launch.argv, env_json=launch.env)
            columns.update(log_path=str(server.log_path), server_pid=server.pid)
            columns.update(server_start_time_s=server.start_time)
        repo.update_run(self.book.db, run_id, **columns)
        self._store()

    # -- the check and falling back -------------------------------------------------------------
    def after_run(self) -> None:
        """The check over the runs so far, stored; a difference falls back to restarts."""
        if not self.state.get("used"):
            return
        runs = queries.list_runs(self.book.db, self.book.experiment_id, include_hidden=True)
        result = resident_check(runs, Primaries.of(self.book.exp).keys)
        self.state["check"] = result
        if result["verdict"] == "differs" and self.active:
            self.fall_back(f"the check: {result['why']}")
        else:
            self._store()

    def fall_back(self, why: str) -> None:
        """Restarts from now on, said once; the sleeping servers are stopped."""
        if not self.active:
            return
        self.active = False
        self.state["fallback"] = why
        self._say(f"resident engines: falling back to restarts: {why}")
        for parked in self.pool.values():
            try:
                parked.server.stop()
            except Exception as exc:  # noqa: BLE001 (the next start says it again)
                print(f"runner: stopping a resident server: {exc}", file=sys.stderr, flush=True)
        self.pool.clear()
        self.awake = None
        self._restore_floor()
        self._store()

    def close(self) -> None:
        """Stop every sleeping server (the one in hand is the unit's to stop)."""
        if self.flags_read is not None:
            self.flags_read.join(FLAGS_WAIT_S)  # its cache write, not left to a dying process
        for parked in self.pool.values():
            parked.server.stop()
        self.pool.clear()
        self._restore_floor()
        self._store()  # none asleep any more

    def _restore_floor(self) -> None:
        """No server asleep any more: device memory goes back to the runner's first floor."""
        if self.unit is not None and self.gpu_before is not None:
            self.unit.gpu_baseline = self.gpu_before
            self.gpu_before = None

    def line(self) -> str:
        return check_line(self.state.get("check"))

    def _say(self, line: str) -> None:
        print(f"runner: {line}", file=sys.stderr, flush=True)
        self.book.progress("resident", {"line": line})

    def _store(self) -> None:
        # The servers asleep belong to no unfinished run: the reaper finds them here when the
        # runner dies (tuning.experiment.supervisor), each checked to be the process started.
        self.state["asleep"] = [
            {"pid": p.server.pid, "start_time_s": p.server.start_time}
            for p in self.pool.values()
            if p.server.pid and p.server.start_time
        ]
        try:
            repo.update_experiment(self.book.db, self.book.experiment_id, resident_json=self.state)
        except Exception as exc:  # noqa: BLE001 (a locked DB must not fail the run)
            print(f"runner: resident state not written: {exc}", file=sys.stderr, flush=True)
