"""May these two runs be compared? Same workload, model, engine, vLLM version and hardware, and
exactly one parameter different (the resolved server config plus the registry's workload
parameters). Zero differences is an A/A comparison, which is allowed: it measures the noise."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tuning.compare.catalog import WORKLOAD_IGNORED, WORKLOAD_PARAMS
from tuning.engine.params import format_value, show_value

# Run facts that must agree; unknown on one side (a failed start) cannot contradict.
_SAME_FACTS = (
    ("model", "model"),
    ("engine", "engine"),
    ("vllm_version", "vLLM version"),
    ("hardware", "hardware"),
    ("gpu_model", "GPU model"),  # fleet runs: the GPUs the run had, not just its node's summary
)


@dataclass
class PairCheck:
    """One run against the baseline's reference run."""

    run_id: int
    baseline_id: int
    comparable: bool
    reasons: list[str] = field(default_factory=list)
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # comparable, but say it

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)

    def refuse(self, reason: str) -> None:
        """Leave this run out, saying why."""
        self.comparable = False
        self.reasons.append(reason)


def _as_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str) and value:
        try:
            out = json.loads(value)
        except ValueError:
            return {}
        return out if isinstance(out, dict) else {}
    return {}


def _decoded(run: Mapping[str, Any], name: str) -> dict[str, Any]:
    """A JSON column, parsed (`config`) or as stored (`config_json`)."""
    parsed = run.get(name)
    return _as_dict(parsed if parsed is not None else run.get(f"{name}_json"))


def run_config(run: Mapping[str, Any]) -> dict[str, Any]:
    return _decoded(run, "config")


def run_workload(run: Mapping[str, Any]) -> dict[str, Any]:
    return _decoded(run, "workload")


def run_parameters(run: Mapping[str, Any]) -> dict[str, Any]:
    """Server config plus the workload's tunable fields, under their registry names."""
    params = run_config(run)
    workload = run_workload(run)
    params.update({name: workload[fld] for name, fld in WORKLOAD_PARAMS.items() if fld in workload})
    return params


def norm_value(value: Any) -> Any:
    """Compare values the way a user would: 16 == 16.0, '16' == 16."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value.strip()
    return value


def value_text(value: Any) -> str:
    """A parameter value as a label shows it ('unset' for a missing one)."""
    return "unset" if value is None else format_value(value)


def describe_changes(changes: Mapping[str, tuple[Any, Any]]) -> str:
    """'block-size 16 vs 8, seed 0 vs 1'."""
    return ", ".join(
        f"{k} {show_value(k, a)} vs {show_value(k, b)}" for k, (a, b) in changes.items()
    )


def _differences(
    base: Mapping[str, Any], cand: Mapping[str, Any], keys: Any
) -> dict[str, tuple[Any, Any]]:
    return {
        k: (base.get(k), cand.get(k))
        for k in keys
        if norm_value(base.get(k)) != norm_value(cand.get(k))
    }


def parameter_diff(
    base: Mapping[str, Any], cand: Mapping[str, Any]
) -> tuple[dict[str, tuple[Any, Any]], dict[str, tuple[Any, Any]]]:
    """(parameter differences, other workload differences) between two runs.

    Parameters are the keys of the resolved server config plus the registry's workload parameters;
    other workload fields (requests, seed, endpoint, warm-ups) are not parameters: a difference
    there means a different workload.
    """
    bc, cc = run_config(base), run_config(cand)
    params = _differences(bc, cc, sorted(set(bc) | set(cc)))
    bw, cw = run_workload(base), run_workload(cand)
    for name, fld in WORKLOAD_PARAMS.items():
        if norm_value(bw.get(fld)) != norm_value(cw.get(fld)):
            params[name] = (bw.get(fld), cw.get(fld))
    skip = WORKLOAD_IGNORED | set(WORKLOAD_PARAMS.values())
    other = _differences(bw, cw, sorted((set(bw) | set(cw)) - skip))
    return params, other


def check_pair(base: Mapping[str, Any], cand: Mapping[str, Any]) -> PairCheck:
    """Is `cand` comparable with `base`? Every reason it is not, in words."""
    reasons: list[str] = []
    for key, label in _SAME_FACTS:
        a, b = base.get(key), cand.get(key)
        if a and b and a != b:
            reasons.append(f"different {label}: {a} vs {b}")
    params, other = parameter_diff(base, cand)
    if other:
        reasons.append("different workload: " + describe_changes(other))
    elif not any(name in WORKLOAD_PARAMS for name in params):
        fa, fb = base.get("workload_fingerprint"), cand.get("workload_fingerprint")
        if fa != fb:
            reasons.append(f"different workload fingerprint: {fa or 'none'} vs {fb or 'none'}")
    if len(params) > 1:
        reasons.append(
            f"{len(params)} parameters differ (one at a time): " + describe_changes(params)
        )
    return PairCheck(
        run_id=int(cand["id"]),
        baseline_id=int(base["id"]),
        comparable=not reasons,
        reasons=reasons,
        changed=params,
        warnings=placement_warnings(base, cand),
    )


def placement_warnings(base: Mapping[str, Any], cand: Mapping[str, Any]) -> list[str]:
    """Fleet runs on different nodes: comparable (same GPU model), but not the same machine."""
    a, b = base.get("node_id"), cand.get("node_id")
    if not a or not b or a == b:
        return []
    where_a = base.get("node_host") or str(a)[:12]
    where_b = cand.get("node_host") or str(b)[:12]
    if where_a == where_b:
        where_a, where_b = str(a)[:12], str(b)[:12]
    return [
        f"run {cand['id']} ran on node {where_b}, baseline run {base['id']} on node {where_a}: "
        "different machines add their own noise"
    ]
