"""Each run's own health, shown where runs are listed and compared: a number is only as good as
the run that produced it (client-bound, slow start, token counts that disagree, a client latency far
from the server's own histograms, samples lost or thinned)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from core.status import suspect_reasons
from tuning.compare.present import fmt
from tuning.engine.effective import stored_mismatches
from tuning.measure.telemetry.completeness import sample_gaps
from ui.common import md_escape as e


def _health(run: Mapping[str, Any]) -> dict[str, Any]:
    health = run.get("health")
    if health is None and run.get("health_json"):
        try:
            health = json.loads(run["health_json"])
        except ValueError:
            health = None
    return health or {}


def health_problems(run: Mapping[str, Any]) -> list[str]:
    """Why this run's numbers deserve suspicion; empty when healthy or not measured."""
    h = _health(run)
    problems = [f"numbers that cannot be true: {why}" for why in suspect_reasons(run)]
    if h.get("client_bound"):
        problems.append(f"client-bound ({'; '.join(h.get('client_bound_reasons') or [])})")
    if h.get("slow_start"):
        w = h.get("warmup_check") or {}
        problems.append(
            f"slow start: first {w.get('first_n')} requests' TTFT "
            f"{fmt(w.get('first_mean_ttft_ms'))} ms vs {fmt(w.get('rest_mean_ttft_ms'))} ms"
        )
    tokens = h.get("tokens") or {}
    if tokens.get("agree") is False:
        problems.append(
            f"tokens disagree: client {tokens.get('client_output_tokens')} vs server "
            f"{fmt(tokens.get('server_output_tokens'), spec='{:,.0f}')}"
        )
    latency = h.get("server_latency") or {}
    if latency.get("flagged"):
        problems.append(f"server disagrees: {'; '.join(latency.get('reasons') or [])}")
    return problems + sample_gaps(h)


def server_gap_ms(run: Mapping[str, Any], latency: str = "ttft") -> float | None:
    """Client minus server mean latency (ms) for the Runs table; None when the server gave none."""
    key = f"client_minus_server_{latency}_ms"
    summary = run.get("summary")
    value = summary.get(key) if isinstance(summary, Mapping) else None
    if value is None:
        lat = _health(run).get("server_latency")
        value = lat.get(key) if isinstance(lat, Mapping) else None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) else None


def health_badge(run: Mapping[str, Any]) -> str:
    if not _health(run):
        return "—"
    return (
        "suspect: " + "; ".join(p.split(" (")[0].split(":")[0] for p in health_problems(run))
        if health_problems(run)
        else "ok"
    )


def config_mismatches(run: Mapping[str, Any]) -> list[str] | None:
    """Each asked parameter the engine did not apply, in words; [] all applied; None unchecked."""
    raw = stored_mismatches(run)
    if raw is None:
        return None
    return [str(m.get("reason") or m.get("param")) for m in raw if isinstance(m, Mapping)]


def config_badge(run: Mapping[str, Any]) -> str:
    """'applied', 'not applied: block-size', or '—' when the run was never checked."""
    found = config_mismatches(run)
    if found is None:
        return "—"
    if not found:
        return "applied"
    return "not applied: " + ", ".join(dict.fromkeys(r.split(":")[0] for r in found))


NOT_APPLIED = (
    "The engine did not run with what {who} asked for: {its} numbers measure another "
    "configuration, and Compare gives {its} side no verdict."
)


def mismatch_frame(runs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per parameter a run asked for and the engine did not apply (plain text cells:
    the values come from the engine's log and may come from a teammate's bundle)."""
    return pd.DataFrame(
        [
            {"run": r.get("id"), "what the engine said": line}
            for r in runs
            for line in config_mismatches(r) or []
        ],
        columns=["run", "what the engine said"],
    )


def render_config_mismatches(runs: Iterable[Mapping[str, Any]], key: str) -> None:
    """A warning and the list, or nothing when every checked run got what it asked for."""
    frame = mismatch_frame(runs)
    if len(frame):
        many = frame["run"].nunique() > 1
        st.warning(
            NOT_APPLIED.format(
                who="these runs" if many else "this run", its="their" if many else "its"
            )
        )
        st.dataframe(frame, hide_index=True, key=key, width="stretch")


def render_run_health(run: Mapping[str, Any]) -> None:
    """The verdict on one run plus the memory facts the engine gave at start, side by side."""
    render_config_mismatches([run], "runs_health_config")
    h = _health(run)
    problems = health_problems(run)
    if problems:
        st.warning("This run's numbers deserve suspicion: " + "; ".join(map(e, problems)))
    elif h:
        st.success("Healthy run: the client kept the target concurrency, token counts agree.")
    left, right = st.columns(2)
    with left:
        st.markdown("**Load health**")
        st.markdown("\n".join(f"- {line}" for line in _load_lines(run, h)))
    with right:
        st.markdown("**Memory as the engine reported it**")
        st.markdown("\n".join(f"- {line}" for line in _memory_lines(run)))
        st.caption(
            "vLLM pre-allocates the KV cache at start, so used memory barely moves under "
            "load while KV usage climbs."
        )


def _load_lines(run: Mapping[str, Any], h: Mapping[str, Any]) -> list[str]:
    steady = h.get("steady_state") or {}
    tokens = h.get("tokens") or {}
    achieved = fmt(h.get("achieved_concurrency"), spec="{:.2f}")
    cpu = fmt(_number(h.get("client_cpu_util")) * 100, spec="{:.0f}")
    # Every value is escaped: a run's health comes from its row, perhaps an imported bundle's.
    return [
        f"target concurrency **{e(h.get('target_concurrency', '—'))}**, achieved "
        f"**{e(achieved)}** (Σ request latency / duration)",
        f"vLLM `num_requests_running`: mean {e(fmt(h.get('server_running_mean')))}, max "
        f"{e(fmt(h.get('server_running_max'), spec='{:.0f}'))} (running + waiting mean "
        f"{e(fmt(h.get('server_inflight_mean')))})",
        f"client CPU {e(cpu)} % of a core, "
        f"event-loop lag p99 {e(fmt(h.get('loop_lag_p99_ms'), spec='{:.1f}'))} ms",
        f"output tok/s: whole run {e(fmt(run.get('output_throughput'), spec='{:,.0f}'))}, "
        f"steady state {e(fmt(steady.get('output_throughput'), spec='{:,.0f}'))} (window "
        f"{e(fmt(steady.get('duration'), spec='{:.1f}'))} s with "
        f"≥ {e(steady.get('need_inflight', '—'))} in flight)",
        f"output tokens: client usage {e(tokens.get('client_output_tokens', '—'))}, server "
        f"counter delta {e(fmt(tokens.get('server_output_tokens'), spec='{:,.0f}'))}",
        *_server_lines(h.get("server_latency") or {}),
    ]


def _server_lines(lat: Mapping[str, Any]) -> list[str]:
    """Client mean beside vLLM's own histogram mean for the same window (client - server =
    transport, tokenizing and the client's own delay); escaped like every value here."""
    if lat.get("server_mean_ttft_ms") is None:
        return ["vLLM's latency histograms: not read for this run"]
    lines = []
    for key, name in (("ttft", "TTFT"), ("e2el", "E2EL"), ("tpot", "TPOT")):
        gap = fmt(lat.get(f"client_minus_server_{key}_ms"), spec="{:+.1f}")
        lines.append(
            f"mean {name}: client {e(fmt(lat.get(f'client_mean_{key}_ms')))} ms, vLLM's "
            f"histogram {e(fmt(lat.get(f'server_mean_{key}_ms')))} ms, client − server "
            f"**{e(gap)} ms**"
        )
    lines.append(f"vLLM queue time (mean): {e(fmt(lat.get('server_mean_queue_ms')))} ms")
    if lat.get("not_comparable"):
        lines.append(f"not judged: {e(lat['not_comparable'])}")
    return lines


def _number(value: Any) -> float:
    try:
        return float(value or 0)
    except (TypeError, ValueError):
        return 0.0


NOT_REPORTED = "not reported by the engine"


class _Facts:
    """Memory facts in their units; a missing one shows "—" and is named once, with why, on the
    last line (a run with no engine facts said "not reported by the engine" eight times)."""

    def __init__(self) -> None:
        self.missing: dict[str, list[str]] = {}  # why -> the facts missing for that reason

    def __call__(
        self,
        name: str,
        value: Any,
        why: str,
        unit: str = "",
        spec: str | None = None,
        suffix: str = "",
    ) -> str:
        text = fmt(value, unit, spec=spec, none="")
        if text:
            return e(text + suffix)
        self.missing.setdefault(why, []).append(name)
        return "—"

    def line(self) -> str | None:
        if not self.missing:
            return None
        parts = [f"{', '.join(names)} ({why})" for why, names in self.missing.items()]
        return f"— = *{NOT_REPORTED}*: " + e("; ".join(parts))


def _memory_lines(run: Mapping[str, Any]) -> list[str]:
    kv = run.get("peak_kv_cache_usage_perc")
    kv_peak = None if kv is None else _number(kv) * 100
    log = "its start log had no such line"
    f = _Facts()
    tokens = f("KV tokens", run.get("kv_cache_tokens"), log, spec="{:,.0f}", suffix=" tokens")
    kv_bytes = f("KV memory", run.get("kv_cache_memory_bytes"), log, "bytes")
    most = f("max concurrency", run.get("max_concurrency"), log, spec="{:,.1f}", suffix="x")
    block = f("block size", run.get("block_size"), log, "count")
    weights = f("weights", run.get("weights_memory_gib"), log, spec="{:.2f}", suffix=" GiB")
    healthy = f("time to healthy", run.get("time_to_healthy_s"), "no /health answer", "s")
    rss = f("peak RSS", run.get("peak_tree_rss_bytes"), "no sample of the server process", "bytes")
    gpu = f("peak GPU", run.get("peak_gpu_tree_bytes"), "no GPU or NVML here", "bytes")
    usage = f("peak KV usage", kv_peak, "no /metrics sample", spec="{:.1f}", suffix=" %")
    preempted = f("preemptions", run.get("preemptions"), "no /metrics counter", "count")
    lines = [
        f"KV cache: **{tokens}**, {kv_bytes}; max concurrency {most}; block size {block}",
        f"weights: {weights}; time to healthy {healthy}",
        f"peak process-tree RSS {rss}; peak GPU (tree) {gpu}",
        f"peak KV-cache usage {usage}; preemptions {preempted}",
    ]
    missing = f.line()
    return [*lines, missing] if missing else lines


def warn_unhealthy(runs: Iterable[Mapping[str, Any]]) -> None:
    flagged = [(r, health_problems(r)) for r in runs]
    flagged = [(r, p) for r, p in flagged if p]
    if flagged:
        st.warning(
            "Some runs deserve suspicion before you trust a verdict:\n"
            + "\n".join(f"- run {r['id']}: {e('; '.join(p))}" for r, p in flagged)
        )
