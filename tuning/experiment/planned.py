"""Experiments on real traffic: a stored workload spec, one workload knob as the variable, the plan
each run replays, and the traffic numbers of a run.

An experiment with a spec (`experiments.workload_spec_json`) replays `materialize(spec)` instead of
the classic fixed-length prompts. A workload parameter changes the spec (the server stays up):
`concurrency` is the closed loop's C (or the open loop's cap), `request-rate` and `burstiness` the
open loop's, `input-len` / `output-len` the mean of a synthetic length distribution. The run's
`workload_json` mirrors these knobs under the Workload's field names (plus `request_rate` and
`burstiness`), so comparability sees the one changed parameter; its fingerprint is the plan's.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from core.records import RequestRecord
from tuning.measure.loadgen.schedule import dispatch_lags, plan_workload
from tuning.measure.traffic import Schedule, TrafficError, WorkloadSpec, fingerprint, materialize
from tuning.measure.traffic.fingerprint import spec_digest
from tuning.measure.traffic.workload import TokenizerLike, Workload, build_prompts

# Workload parameters a spec can take as the experiment's one variable.
SPEC_KNOBS: tuple[str, ...] = (
    "concurrency",
    "request-rate",
    "burstiness",
    "input-len",
    "output-len",
)


def spec_of(data: Any) -> WorkloadSpec | None:
    """The stored spec of an experiment or run (None: the classic workload)."""
    return None if data is None else WorkloadSpec.from_dict(data)


def with_knob(spec: WorkloadSpec, name: str, value: Any) -> WorkloadSpec:
    """`spec` with one workload parameter set; TrafficError when the spec has no such knob."""
    key = name.strip().replace("_", "-")
    arrival = spec.arrival
    if key == "concurrency":
        if arrival.kind == "closed":
            return replace(spec, arrival=replace(arrival, concurrency=int(value)))
        return replace(spec, arrival=replace(arrival, max_concurrency=int(value)))
    if key in ("request-rate", "burstiness"):
        if arrival.kind != "open":
            raise TrafficError(f"{key} needs an open-loop arrival (--request-rate)")
        if key == "request-rate":
            return replace(spec, arrival=replace(arrival, rate=float(value)))
        return replace(spec, arrival=replace(arrival, burstiness=float(value)))
    if key in ("input-len", "output-len"):
        dist = spec.input if key == "input-len" else spec.output
        if dist is None or dist.kind == "histogram":
            raise TrafficError(f"{key} needs a synthetic length distribution with a mean")
        new = replace(dist, mean=int(value) if dist.kind in ("fixed", "uniform") else float(value))
        if key == "input-len":
            return replace(spec, input=new)
        return replace(spec, output=new)
    raise TrafficError(f"{name!r} is not a workload knob of a spec ({', '.join(SPEC_KNOBS)})")


def apply_value(
    workload: Workload, spec: WorkloadSpec | None, name: str, value: Any
) -> tuple[Workload, WorkloadSpec | None]:
    """A workload parameter's value applied to the run's workload and, when there is one, spec."""
    if spec is None:
        return workload.with_value(name, value), None
    spec = with_knob(spec, name, value)
    if name.replace("_", "-") in ("concurrency", "input-len", "output-len"):
        workload = workload.with_value(name, value)
    return workload, spec


def mirrored(workload: Workload, spec: WorkloadSpec) -> dict[str, Any]:
    """The run's workload_json: the Workload's fields with the spec's knobs in their place."""
    arrival = spec.arrival
    out = workload.to_dict()
    out["concurrency"] = (
        arrival.concurrency if arrival.kind == "closed" else arrival.max_concurrency
    )
    out["input_len"] = spec.input.mean if spec.input is not None else None
    out["output_len"] = spec.output.mean if spec.output is not None else None
    out["shared_prefix_len"] = spec.prefixes.length
    out["num_requests"] = spec.num_requests
    out["request_rate"] = arrival.rate
    out["burstiness"] = arrival.burstiness if arrival.kind == "open" else None
    return out


def run_fields(workload: Workload, spec: WorkloadSpec | None) -> dict[str, Any]:
    """The create_run columns that describe the workload (the fingerprint is the spec's until the
    plan is built, then the plan's: `Prepared.fingerprint`)."""
    if spec is None:
        return {"workload_json": workload.to_dict(), "workload_fingerprint": workload.fingerprint()}
    return {
        "workload_json": mirrored(workload, spec),
        "workload_spec_json": spec.to_dict(),
        "workload_fingerprint": spec_digest(spec),
    }


@dataclass(frozen=True)
class Prepared:
    """What the load generator needs for a planned run."""

    plan: Schedule
    warmup_prompts: list[str]
    workload: Workload  # schedule.plan_workload: the client's request count, C, warm-ups
    fingerprint: str


def prepare(workload: Workload, spec: WorkloadSpec, tokenizer: TokenizerLike) -> Prepared:
    """Materialize the plan; warm-ups are the classic random prompts (one wave by default), so
    they never prime the prefix cache with the measured prompts."""
    plan = materialize(spec, tokenizer)
    load = plan_workload(
        plan,
        0,
        workload.endpoint,
        workload.request_timeout_s,
        workload.seed,
    )
    warm_n = load.concurrency if workload.num_warmups is None else workload.num_warmups
    prompts: list[str] = []
    if warm_n:
        classic = replace(workload, num_requests=1, num_warmups=warm_n, input_len=32, output_len=8)
        classic = replace(classic, shared_prefix_len=0, seed=workload.seed + 7919)
        prompts = build_prompts(classic, tokenizer)[:warm_n]
    return Prepared(plan, prompts, replace(load, num_warmups=warm_n), fingerprint(plan))


def traffic_summary(
    records: list[RequestRecord], plan: Schedule, duration_s: float
) -> dict[str, Any]:
    """Per-turn TTFT (first turns vs later ones), the open loop's achieved rate against its
    target, and the dispatch lag; JSON-ready, stored in the run's summary."""
    arrival = plan.spec.arrival
    out: dict[str, Any] = {"arrival": arrival.kind, "dispatch_lag": dispatch_lags(records)}
    ok = [r for r in records if r.ok and r.ttft is not None]
    for label, chosen in (
        ("first_turn", [r for r in ok if not r.turn]),
        ("later_turns", [r for r in ok if r.turn]),
    ):
        ttfts = [1000.0 * (r.ttft or 0.0) for r in chosen]
        out[f"mean_ttft_ms_{label}"] = float(np.mean(ttfts)) if ttfts else None
        out[f"requests_{label}"] = len(chosen)
    firsts = sorted(r.start for r in records if not r.turn)
    if arrival.kind == "open" and arrival.rate is not None and len(firsts) > 1 and firsts[-1] > 0:
        achieved = len(firsts) / firsts[-1]
        out["target_request_rate"] = arrival.rate
        out["achieved_request_rate"] = achieved
        out["rate_shortfall"] = 1.0 - achieved / arrival.rate if math.isfinite(arrival.rate) else 0
    lag = out["dispatch_lag"]
    # A client (or cap) that could not keep the schedule: more than 50 ms late at the p99.
    out["schedule_kept"] = not (lag.get("planned") and lag.get("p99_s", 0.0) > 0.05)
    out["duration_s"] = duration_s
    return out


def request_prompts(plan: Schedule) -> list[tuple[int, str, str]]:
    """(index, sha256, text) of each planned request's prompt, as planned (a later turn's
    earlier answers are placeholders of their token length): what the store keeps per request."""
    out = []
    for r in plan.requests:
        text = r.prompt
        out.append((r.index, hashlib.sha256(text.encode()).hexdigest(), text))
    return out


def judge_traffic(
    health: dict[str, Any], records: list[RequestRecord], plan: Schedule, duration_s: float
) -> dict[str, Any]:
    """The traffic summary, and `health`'s client-bound verdict for planned traffic: an open loop,
    a trace or conversations with think time never hold C in flight by design, so that reason goes;
    a schedule the client (or the cap) did not keep is the reason instead."""
    traffic = traffic_summary(records, plan, duration_s)
    reasons = list(health.get("client_bound_reasons") or [])
    paced = plan.spec.arrival.kind != "closed" or plan.spec.multi_turn.think_time_s > 0
    if paced:
        reasons = [r for r in reasons if not r.startswith("never held")]
    if not traffic["schedule_kept"]:
        lag = traffic["dispatch_lag"]
        reasons.append(
            f"the schedule was not kept: dispatch lag p99 {1000 * lag['p99_s']:.0f} ms "
            "(a busy client, or a max-concurrency cap the load outgrew)"
        )
    health["client_bound_reasons"] = reasons
    health["client_bound"] = bool(reasons)
    return traffic
