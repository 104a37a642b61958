"""Findings after a run: what its stored signals say about the server, each with the next
experiment to try. Pure functions of one stored run row (`store.queries.get_run`); `plan_next`
writes the suggested experiment (the run's own baseline and workload, one parameter changed).

- preemptions -> KV pressure: more KV memory, or fewer sequences at once;
- requests waiting while the KV cache was never more than half used -> a scheduler cap
  (max-num-seqs, max-num-batched-tokens), not memory, held them back;
- a client-bound run (the runner's own health flag, `tuning.measure.health.client_limits`);
- a low prefix-cache hit rate on a load whose prompts share a prefix;
- a parameter the engine did not apply (`tuning.engine.effective`'s stored mismatch).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from store import timeseries
from tuning.compare.comparability import run_config, run_workload
from tuning.engine.effective import stored_mismatches
from tuning.engine.params import format_value, get_param, show_value
from tuning.engine.value_text import join_values

KV_LOW = 0.5  # peak KV usage under this while requests waited: memory was not the limit
PREFIX_SHARE = 0.5  # a hit rate under this share of the prefix's share of the prompt is low
DEFAULT_GPU_UTIL = 0.9  # vLLM's default --gpu-memory-utilization
DEFAULT_BATCHED_TOKENS = 2048  # a common default prefill budget, when the run set none
WAITING_SHARE = 0.2  # waiting with a roomy KV cache this share of the load: a cap, not ramp-up
SAMPLE_SERIES = ("num_requests_waiting", "kv_cache_usage_perc")  # what findings read of samples


@dataclass(frozen=True)
class NextExperiment:
    """One parameter and its values (the run's current value first), everything else as the run."""

    param: str
    values: list[Any]
    why: str
    repeats: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {"param": self.param, "values": self.values, "why": self.why}

    def command(self, run: Mapping[str, Any]) -> str:
        """The same experiment from the CLI (the run's baseline as --set, its workload's flags)."""
        config = {k: v for k, v in run_config(run).items() if k != self.param}
        words = ["tuning-lab", "experiment", "--param", self.param]
        words += ["--values", join_values(self.values)]
        for key, value in sorted(config.items()):
            words += ["--set", f"{key}={format_value(value)}"]
        wl = run_workload(run)
        for flag in ("num_requests", "concurrency", "input_len", "output_len", "shared_prefix_len"):
            if flag in wl and self.param.replace("-", "_") != flag:
                words += [f"--{flag.replace('_', '-')}", str(wl[flag])]
        if self.repeats > 1:
            words += ["--repeats", str(self.repeats)]
        return shlex.join(words)


@dataclass(frozen=True)
class Finding:
    kind: str
    title: str
    evidence: str
    next: list[NextExperiment] = field(default_factory=list)
    advice: str = ""

    def to_dict(self, run: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "title": self.title,
            "evidence": self.evidence,
            "advice": self.advice,
            "next": [
                {**n.to_dict(), **({"command": n.command(run)} if run is not None else {})}
                for n in self.next
            ],
        }


def _summary(run: Mapping[str, Any]) -> Mapping[str, Any]:
    summary = run.get("summary")
    return summary if isinstance(summary, Mapping) else {}


def _health(run: Mapping[str, Any]) -> Mapping[str, Any]:
    health = run.get("health")
    return health if isinstance(health, Mapping) else {}


def _num(run: Mapping[str, Any], key: str) -> float | None:
    value = run.get(key)
    if value is None:
        value = _summary(run).get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _int_of(config: Mapping[str, Any], key: str) -> int | None:
    try:
        return int(config[key]) if config.get(key) is not None else None
    except (TypeError, ValueError):
        return None


def _seqs_now(run: Mapping[str, Any]) -> int | None:
    """The run's max-num-seqs: asked for, else the load's concurrency (no more can run)."""
    conc = run_workload(run).get("concurrency")
    return _int_of(run_config(run), "max-num-seqs") or (conc if isinstance(conc, int) else None)


def _more_kv_memory(run: Mapping[str, Any]) -> NextExperiment:
    config = run_config(run)
    env = run.get("env") if isinstance(run.get("env"), Mapping) else {}
    why = "more KV memory: fewer preemptions if the cache was what ran out"
    kv_bytes = _int_of(config, "kv-cache-memory-bytes")
    if kv_bytes:
        return NextExperiment("kv-cache-memory-bytes", [kv_bytes, kv_bytes * 2], why)
    cpu_space = _int_of({**(env or {}), **config}, "VLLM_CPU_KVCACHE_SPACE")
    if cpu_space:
        return NextExperiment("VLLM_CPU_KVCACHE_SPACE", [cpu_space, cpu_space * 2], why)
    util = config.get("gpu-memory-utilization")
    now = float(util) if util is not None else DEFAULT_GPU_UTIL
    return NextExperiment("gpu-memory-utilization", [now, round(min(0.98, now + 0.05), 2)], why)


def _kv_pressure(run: Mapping[str, Any]) -> Finding | None:
    preemptions = _num(run, "preemptions")
    if not preemptions or preemptions <= 0:
        return None
    kv = _num(run, "peak_kv_cache_usage_perc")
    seen = f"; peak KV usage {kv * 100:.0f} %" if kv is not None else ""
    nxt = [_more_kv_memory(run)]
    seqs = _seqs_now(run)
    if seqs and seqs > 1:
        nxt.append(
            NextExperiment(
                "max-num-seqs",
                [seqs, max(1, seqs // 2)],
                "fewer sequences at once: each keeps its KV blocks instead of being preempted",
            )
        )
    return Finding(
        "kv_pressure",
        "KV-cache pressure: the engine preempted requests",
        f"{preemptions:.0f} preemptions during the load{seen}",
        nxt,
    )


def waiting_share(
    samples: Sequence[Mapping[str, Any]], window: Sequence[float] | None
) -> tuple[float, int] | None:
    """Of the load window's sample instants, the share where requests waited while the KV cache
    was under KV_LOW used, and how many instants; None without such samples."""
    at: dict[float, dict[str, float]] = {}
    for s in samples:
        t = float(s["t_s"])
        if window and len(window) == 2 and not (window[0] <= t <= window[1]):
            continue
        at.setdefault(t, {})[str(s["series"])] = float(s["value"])
    points = [p for p in at.values() if "num_requests_waiting" in p]
    if not points:
        return None
    hit = [
        p
        for p in points
        if p["num_requests_waiting"] > 0 and p.get("kv_cache_usage_perc", 1.0) < KV_LOW
    ]
    return len(hit) / len(points), len(points)


def _capped(run: Mapping[str, Any], samples: Sequence[Mapping[str, Any]] | None) -> Finding | None:
    waiting = _num(run, "max_num_requests_waiting")
    kv = _num(run, "peak_kv_cache_usage_perc")
    share = waiting_share(samples or [], _summary(run).get("load_window_s"))
    if share is not None:  # the samples say how long: a moment at ramp-up is no cap
        if share[0] < WAITING_SHARE:
            return None
        seen = f"requests waited with the KV cache under {KV_LOW * 100:.0f} % used for "
        seen += f"{share[0] * 100:.0f} % of the load ({share[1]} samples)"
    elif not waiting or waiting <= 0 or kv is None or kv >= KV_LOW:
        return None
    else:
        seen = f"up to {waiting:.0f} requests waiting, peak KV usage {kv * 100:.0f} %"
    config = run_config(run)
    running = _num(run, "max_num_requests_running")
    conc = run_workload(run).get("concurrency")
    nxt = []
    cap = _int_of(config, "max-num-seqs") or (int(running) if running else None)
    if cap and isinstance(conc, int) and cap < conc and (running is None or running >= cap):
        nxt.append(
            NextExperiment(
                "max-num-seqs",
                [cap, min(cap * 2, conc)],
                f"a higher cap on sequences: at most {cap} ran of {conc} sent; the KV cache "
                "has room",
            )
        )
    tokens = _int_of(config, "max-num-batched-tokens") or DEFAULT_BATCHED_TOKENS
    nxt.append(
        NextExperiment(
            "max-num-batched-tokens",
            [tokens, tokens * 2],
            "a larger prefill budget per step: waiting prompts get scheduled sooner",
        )
    )
    ran = f"; at most {running:.0f} running" if running is not None else ""
    return Finding(
        "scheduler_cap",
        "Requests waited while the KV cache had room: a scheduler cap, not memory",
        seen + ran,
        nxt,
    )


def _client_bound(run: Mapping[str, Any]) -> Finding | None:
    health = _health(run)
    if not (health.get("client_bound") or run.get("client_bound")):
        return None
    reasons = "; ".join(str(r) for r in health.get("client_bound_reasons") or []) or "flagged"
    conc = run_workload(run).get("concurrency")
    nxt = []
    if isinstance(conc, int):
        nxt.append(
            NextExperiment(
                "concurrency",
                [conc],
                "the same load again (2 repeats) on a quieter machine: if the numbers move, "
                "the client set them",
                repeats=2,
            )
        )
    return Finding(
        "client_bound",
        "Client-bound: the load generator may have set these numbers",
        reasons,
        nxt,
        advice="Run the load from a less busy machine or core before trusting a comparison.",
    )


def _low_prefix_hits(run: Mapping[str, Any]) -> Finding | None:
    wl = run_workload(run)
    prefix, total = wl.get("shared_prefix_len") or 0, wl.get("input_len") or 0
    if not prefix or not total:
        return None
    expected = prefix / total
    rate = _num(run, "prefix_cache_hit_rate")
    config = run_config(run)
    off = config.get("enable-prefix-caching") in (False, "false", "False", 0)
    if not off and (rate is None or rate >= PREFIX_SHARE * expected):
        return None
    seen = "no hits measured" if rate is None else f"hit rate {rate * 100:.0f} %"
    evidence = f"{seen} where {expected * 100:.0f} % of each prompt is a shared prefix"
    if off:
        nxt = NextExperiment(
            "enable-prefix-caching", [False, True], "prefix caching is off: turn it on"
        )
    elif (block := _int_of(config, "block-size") or 16) > prefix:
        nxt = NextExperiment(
            "block-size",
            [block, max(1, block // 2)],
            f"the prefix ({prefix} tokens) is shorter than a block: only full blocks are cached",
        )
    else:
        nxt = _more_kv_memory(run)
        nxt = NextExperiment(nxt.param, nxt.values, "more KV memory: cached prefixes are evicted")
    return Finding(
        "low_prefix_hits", "Low prefix-cache hit rate on a shared-prefix load", evidence, [nxt]
    )


def _not_applied(run: Mapping[str, Any]) -> Finding | None:
    found = [m for m in stored_mismatches(run) or [] if isinstance(m, Mapping)]
    if not found:
        return None
    return Finding(
        "config_mismatch",
        "The engine did not apply the configuration asked for",
        "; ".join(str(m.get("reason") or m.get("param")) for m in found),
        [],
        advice="Its numbers measure another configuration: check the flag's name and the "
        "engine's version (or its log) before running this value again.",
    )


def findings(
    run: Mapping[str, Any], samples: Sequence[Mapping[str, Any]] | None = None
) -> list[Finding]:
    """What one stored run's signals say, most fundamental first (a configuration the engine did
    not apply makes the rest moot). `samples` (its SAMPLE_SERIES rows) tell a lasting queue from a
    moment at ramp-up; without them the run's peaks decide."""
    rules = (
        _not_applied(run),
        _kv_pressure(run),
        _capped(run, samples),
        _low_prefix_hits(run),
        _client_bound(run),
    )
    return [f for f in rules if f is not None]


def stored_findings(db: Any, run: Mapping[str, Any]) -> list[Finding]:
    """`findings` of a stored run with its queue and KV samples read from the lab's DB."""
    return findings(run, timeseries.get_samples(db, int(run["id"]), SAMPLE_SERIES))


def plan_suggested(
    db_path: str | Path,
    run: Mapping[str, Any],
    nxt: NextExperiment,
    experiment: Mapping[str, Any],
    engine: Any,
    *,
    author: str = "",
    host: str = "",
) -> int:
    """Write the suggested experiment: the run's baseline and workload (its traffic spec too),
    `nxt`'s parameter and values, on `engine` (this lab's, never a stored command); its id."""
    from tuning.experiment.plan import plan_experiment
    from tuning.experiment.planned import spec_of
    from tuning.experiment.spec import ExperimentSpec
    from tuning.measure.traffic.workload import Workload

    base_url = experiment.get("base_url")
    get_param(nxt.param)
    return plan_experiment(
        db_path,
        ExperimentSpec.build(
            param=nxt.param,
            values=list(nxt.values),
            workload=Workload.from_dict(run_workload(run)),
            engine=None if base_url else engine,
            base_config=run_config(run),
            repeats=nxt.repeats,
            base_url=base_url,
            model=experiment.get("model") if base_url else None,
            name=f"next after run {int(run['id'])}: {nxt.param} = "
            + ", ".join(show_value(nxt.param, v) for v in nxt.values),
            author=author,
            host=host,
            workload_spec=spec_of(experiment.get("workload_spec")),
        ),
    )


def finding_lines(found: Sequence[Finding], run: Mapping[str, Any]) -> list[str]:
    """The findings as text lines (the CLI's output)."""
    if not found:
        return [f"run {run['id']}: no finding (its stored signals look healthy)"]
    lines = []
    for f in found:
        lines.append(f"- {f.title}: {f.evidence}")
        if f.advice:
            lines.append(f"  {f.advice}")
        for n in f.next:
            values = ", ".join(show_value(n.param, v) for v in n.values)
            lines.append(f"  next: {n.param} = {values} ({n.why})")
            lines.append(f"    {n.command(run)}")
    return lines
