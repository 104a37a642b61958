"""Each run's own health, shown where runs are listed and compared: a number is only as good as
the run that produced it (client-bound, slow start, token counts that disagree)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd
import streamlit as st

from tuning.compare.present import fmt


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
    problems = (
        [f"client-bound ({'; '.join(h.get('client_bound_reasons') or [])})"]
        if h.get("client_bound")
        else []
    )
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
    return problems


def health_badge(run: Mapping[str, Any]) -> str:
    if not _health(run):
        return "—"
    return (
        "⚠ " + "; ".join(p.split(" (")[0].split(":")[0] for p in health_problems(run))
        if health_problems(run)
        else "ok"
    )


def config_mismatches(run: Mapping[str, Any]) -> list[str] | None:
    """Each asked parameter the engine did not apply, in words; [] all applied; None unchecked."""
    raw = run.get("config_mismatch")
    if raw is None and isinstance(run.get("config_mismatch_json"), str):
        try:
            raw = json.loads(run["config_mismatch_json"])
        except ValueError:
            raw = None
    if not isinstance(raw, list):
        return None
    return [str(m.get("reason") or m.get("param")) for m in raw if isinstance(m, Mapping)]


def config_badge(run: Mapping[str, Any]) -> str:
    """'applied', '⚠ not applied: block-size', or '—' when the run was never checked."""
    found = config_mismatches(run)
    if found is None:
        return "—"
    if not found:
        return "applied"
    return "⚠ not applied: " + ", ".join(dict.fromkeys(r.split(":")[0] for r in found))


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
        st.warning("This run's numbers deserve suspicion: " + "; ".join(problems))
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
    cpu = fmt((h.get("client_cpu_util") or 0) * 100, spec="{:.0f}")
    return [
        f"target concurrency **{h.get('target_concurrency', '—')}**, achieved "
        f"**{achieved}** (Σ request latency / duration)",
        f"vLLM `num_requests_running`: mean {fmt(h.get('server_running_mean'))}, max "
        f"{fmt(h.get('server_running_max'), spec='{:.0f}')} (running + waiting mean "
        f"{fmt(h.get('server_inflight_mean'))})",
        f"client CPU {cpu} % of a core, "
        f"event-loop lag p99 {fmt(h.get('loop_lag_p99_ms'), spec='{:.1f}')} ms",
        f"output tok/s: whole run {fmt(run.get('output_throughput'), spec='{:,.0f}')}, steady "
        f"state {fmt(steady.get('output_throughput'), spec='{:,.0f}')} (window "
        f"{fmt(steady.get('duration'), spec='{:.1f}')} s with "
        f"≥ {steady.get('need_inflight', '—')} in flight)",
        f"output tokens: client usage {tokens.get('client_output_tokens', '—')}, server "
        f"counter delta {fmt(tokens.get('server_output_tokens'), spec='{:,.0f}')}",
    ]


def _memory_lines(run: Mapping[str, Any]) -> list[str]:
    kv_peak = fmt((run.get("peak_kv_cache_usage_perc") or 0) * 100, spec="{:.1f}")
    preemptions = run.get("preemptions")
    return [
        f"KV cache: **{fmt(run.get('kv_cache_tokens'), spec='{:,.0f}')} tokens**, "
        f"{fmt(run.get('kv_cache_memory_bytes'), 'bytes')}; max concurrency "
        f"{fmt(run.get('max_concurrency'), spec='{:,.1f}')}x; "
        f"block size {run.get('block_size') or '—'}",
        f"weights: {fmt(run.get('weights_memory_gib'), spec='{:.2f}')} GiB; time to healthy "
        f"{fmt(run.get('time_to_healthy_s'))} s",
        f"peak process-tree RSS {fmt(run.get('peak_tree_rss_bytes'), 'bytes')}; "
        f"peak GPU (tree) {fmt(run.get('peak_gpu_tree_bytes'), 'bytes')}",
        f"peak KV-cache usage {kv_peak} %; "
        f"preemptions {preemptions if preemptions is not None else '—'}",
    ]


def warn_unhealthy(runs: Iterable[Mapping[str, Any]]) -> None:
    flagged = [(r, health_problems(r)) for r in runs]
    flagged = [(r, p) for r, p in flagged if p]
    if flagged:
        st.warning(
            "Some runs deserve suspicion before you trust a verdict:\n"
            + "\n".join(f"- run {r['id']}: {'; '.join(p)}" for r, p in flagged)
        )
