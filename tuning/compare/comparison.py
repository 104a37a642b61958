"""Baseline vs candidates: runs checked, grouped into sides, and every metric judged.

A side is all runs (repeats) of one configuration. The baseline is one side; every distinct
changed value is a candidate side. Runs that are not comparable with the baseline's reference run
(or not finished) are left out, each with its reason (see comparability); the verdicts come from
stats. Only stored summary columns are read, except goodput, which depends on the SLOs and is
recomputed from the stored request rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.status import Status, is_active, suspect_reasons
from core.units import fmt
from store import queries
from tuning.compare.catalog import METRICS, TOKENS_PER_CHUNK, Metric
from tuning.compare.comparability import (
    PairCheck,
    check_pair,
    describe_changes,
    norm_value,
    run_parameters,
    value_text,
)
from tuning.compare.drift import Drift, baseline_drift
from tuning.compare.standing import counted, not_applied, reused_words
from tuning.compare.stats import (
    CONFIDENCE,
    MARGIN,
    MIN_RUNS,
    RESAMPLES,
    SEED,
    Change,
    bootstrap_change,
    mean_interval,
)
from tuning.engine.params import show_value
from tuning.measure import metrics as m

RequestLoader = Callable[[int], m.Columns]
Run = Mapping[str, Any]


@dataclass
class Side:
    """All runs of one configuration: the unit a verdict is about."""

    label: str
    param: str | None
    value: str | None
    run_ids: list[int]
    measured_ids: list[int]  # runs that produced a summary
    failed: list[dict[str, Any]]  # runs that did not (kind, reason)
    values: dict[str, list[float]]  # metric -> one value per measured run
    per_run: dict[str, dict[int, float | None]] = field(default_factory=dict)
    # Runs whose engine did not apply this side's value (tuning.engine.effective): no verdict then.
    not_applied: list[str] = field(default_factory=list)
    # Runs counted here without being measured again (tuning.experiment.reuse): where from.
    reused: list[str] = field(default_factory=list)
    # Suspect runs (core.status) counted here because the user included them: why suspect.
    suspect: list[str] = field(default_factory=list)
    # Runs read from another tool's result file (tuning.experiment.imported): which tool.
    imported: list[str] = field(default_factory=list)

    def brief(self) -> dict[str, Any]:
        keys = ("label", "run_ids", "not_applied", "reused", "suspect", "imported")
        return {k: getattr(self, k) for k in keys}

    def mean_interval(self, key: str, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
        """The interval of this side's mean (runs as the unit), by the rule the verdicts use
        (stats.interval); None under 2 runs."""
        return mean_interval(self.values.get(key) or [], confidence)

    def stats(self, key: str) -> dict[str, float | None]:
        vals = self.values.get(key) or []
        if not vals:
            return {"mean": None, "min": None, "max": None, "n": 0}
        arr = np.asarray(vals, dtype=float)
        return {
            "mean": float(arr.mean()),
            "min": float(arr.min()),
            "max": float(arr.max()),
            "n": int(arr.size),
        }


@dataclass
class Comparison:
    baseline: Side
    candidates: list[Side]
    checks: list[PairCheck]
    metrics: list[Metric]
    changes: dict[tuple[str, str], Change]  # (candidate label, metric key) -> Change
    slo_ms: dict[str, float]
    confidence: float
    param: str | None
    load_windows: dict[int, tuple[float, float]] = field(default_factory=dict)
    margin: float = MARGIN  # the equivalence margin E (a fraction of the baseline's mean)
    drift: list[Drift] = field(default_factory=list)  # the baseline's first run vs its last
    # metric key -> its role in the decision ('objective', 'guard'); any other metric is "for
    # information, not corrected" (set from the decision record: tuning.compare.decision)
    roles: dict[str, str] = field(default_factory=dict)

    @property
    def excluded(self) -> list[PairCheck]:
        return [c for c in self.checks if not c.comparable]

    @property
    def sides(self) -> list[Side]:
        return [self.baseline, *self.candidates]

    @property
    def run_count(self) -> int:
        return sum(len(s.run_ids) for s in self.sides)

    @property
    def measured_ids(self) -> list[int]:
        return [rid for s in self.sides for rid in s.measured_ids]

    def rows(self) -> list[dict[str, Any]]:
        """Long format, one row per side and metric: what CSV and JSON exports carry."""
        return [self._row(side, metric) for side in self.sides for metric in self.metrics]

    def _row(self, side: Side, metric: Metric) -> dict[str, Any]:
        ch = self.changes.get((side.label, metric.key))
        stats = side.stats(metric.key)

        def pct(x: float | None) -> float | None:
            return None if x is None else x * 100

        return {
            "side": side.label,
            "role": "baseline" if side is self.baseline else "candidate",
            "parameter": side.param,
            "value": side.value,
            "runs": len(side.run_ids),
            "measured_runs": len(side.measured_ids),
            "failed_runs": len(side.failed),
            "metric": metric.key,
            "metric_label": metric.label,
            "unit": metric.unit,
            "better": metric.better,
            **stats,
            "value_shown": None if side.value is None else show_value(side.param, side.value),
            "mean_shown": fmt(stats["mean"], metric.unit, none=""),
            "metric_role": self.roles.get(metric.key, "for information, not corrected"),
            "scale": metric.scale,
            "change_pct": pct(ch.rel_change) if ch else None,
            "ci_low_pct": pct(ch.rel_low) if ch else None,
            "ci_high_pct": pct(ch.rel_high) if ch else None,
            "ci_scale": ch.scale if ch and ch.rel_low is not None else None,
            "change_diff": ch.diff if ch else None,
            "ci_low_diff": ch.diff_low if ch else None,
            "ci_high_diff": ch.diff_high if ch else None,
            "ci_confidence": ch.confidence if ch else None,
            "verdict": ch.verdict if ch else None,
            "more_runs_per_side": ch.more.to_json()["runs"] if ch and ch.more else None,
            "more_runs_goal": ch.more.goal if ch and ch.more else None,
            "equivalence_margin_pct": self.margin * 100,
            "not_applied": "; ".join(side.not_applied) or None,
            "confidence": self.confidence,
            "run_ids": " ".join(map(str, side.run_ids)),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "parameter": self.param,
            "confidence": self.confidence,
            "slo_ms": self.slo_ms,
            "verdict_rule": {
                "unit": "run",
                "statistic": "mean",
                "interval": "the wider of the percentile bootstrap over runs and Welch's t, of "
                "log(mean_c / mean_b) when every run is above 0 (ci_scale 'log': the % interval "
                "is exp(lo) - 1 .. exp(hi) - 1, never below -100 %), else of mean_c - mean_b "
                "(ci_scale 'difference')",
                "resamples": RESAMPLES,
                "equivalence_margin": self.margin,
                "min_runs": MIN_RUNS,
                "metric_scale": "a metric whose scale is 'difference' (counts, fractions) is "
                "judged and shown as mean_c - mean_b in its unit, never as a %",
                "verdicts": {
                    "better/worse": "the interval of the change excludes no change",
                    "changed": "the same, for a metric with no better direction",
                    "equivalent": "the interval lies within ±log(1 + margin) on the log scale, "
                    "±margin of the baseline's mean on the difference scale",
                    "undecided": "neither; more_runs_per_side estimates the runs that decide it",
                },
            },
            "baseline": self.baseline.brief(),
            "candidates": [s.brief() for s in self.candidates],
            "baseline_drift": [d.to_json() for d in self.drift],
            "not_comparable": [
                {"run_id": c.run_id, "baseline_id": c.baseline_id, "reasons": c.reasons}
                for c in self.excluded
            ],
            "rows": self.rows(),
        }


def _finite(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def run_metric_values(
    run: Run, slo_ms: Mapping[str, float], requests: RequestLoader | None
) -> dict[str, float | None]:
    """One number per metric for one run, from its stored summary columns (never recomputed)
    except goodput, which depends on the SLO and is recomputed from the stored request rows."""
    out = {x.key: _finite(run.get(x.key)) for x in METRICS}
    out[TOKENS_PER_CHUNK] = _finite(run.get(TOKENS_PER_CHUNK))  # shown beside ITL, not judged
    out["request_goodput"] = None
    if slo_ms and requests is not None and run.get("duration"):
        cols = requests(int(run["id"]))
        if cols.n:
            goodput = m.goodput(cols, float(run["duration"]), slo_ms)
            out["request_goodput"] = goodput["request_goodput"]
    return out


def _side_label(param: str | None, value: Any) -> str:
    """'kv-cache-memory-bytes = 1 GiB' (the side's `value` keeps the canonical '1073741824')."""
    return f"{param} = {show_value(param, value)}" if param else "baseline"


def _check(ref: Run, run: Run, base_set: set[int]) -> PairCheck:
    """check_pair plus what makes a run unusable whatever its configuration."""
    check = check_pair(ref, run)
    status = run.get("status")
    if is_active(status):
        check.refuse(f"not finished (status {status})")
    elif status == Status.CANCELLED:
        check.refuse("cancelled: its load was cut short")
    if int(run["id"]) in base_set and check.comparable and check.changed:
        check.refuse(
            "picked as baseline but not a repeat of it: " + describe_changes(check.changed)
        )
    return check


def _make_side(
    label: str,
    param: str | None,
    value: Any,
    members: list[Run],
    slo: Mapping[str, float],
    requests: RequestLoader | None,
    include_suspect: bool = False,
) -> Side:
    """The runs of one configuration as a Side: measured runs give values, others a reason (a
    suspect run is one of those unless `include_suspect`)."""
    side = Side(
        label=label,
        param=param,
        value=None if value is None else value_text(value),
        run_ids=[int(r["id"]) for r in members],
        measured_ids=[],
        failed=[],
        values={k: [] for k in (*(x.key for x in METRICS), TOKENS_PER_CHUNK)},
    )
    for r in members:
        rid = int(r["id"])
        if isinstance(r.get("reused_from"), Mapping):
            side.reused.append(reused_words(rid, r["reused_from"]))
        if str(r.get("origin") or "").startswith("file:"):
            side.imported.append(f"run {rid} ({str(r['origin'])[5:]})")
        why = "; ".join(suspect_reasons(r))
        if not counted(r, include_suspect):
            side.failed.append(
                {
                    "run_id": rid,
                    "status": r.get("status"),
                    "kind": r.get("failure_kind"),
                    "reason": why or r.get("failure_reason"),
                }
            )
            continue
        if why:
            side.suspect.append(f"run {rid}: {why}")
        side.measured_ids.append(rid)
        for key, v in run_metric_values(r, slo, requests).items():
            side.per_run.setdefault(key, {})[rid] = v
            if v is not None:
                side.values[key].append(v)
    return side


def _load_windows(runs: Sequence[Run]) -> dict[int, tuple[float, float]]:
    """Each run's load window (s since server start), from its summary."""
    out = {}
    for run in runs:
        summary = run.get("summary")
        window = summary.get("load_window_s") if isinstance(summary, Mapping) else None
        if (
            isinstance(window, (list, tuple))
            and len(window) == 2
            and all(isinstance(x, (int, float)) for x in window)
        ):
            out[int(run["id"])] = (float(window[0]), float(window[1]))
    return out


def build_comparison(
    runs: Sequence[Run],
    baseline_ids: Sequence[int],
    *,
    slo_ms: Mapping[str, float] | None = None,
    requests: RequestLoader | None = None,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    margin: float = MARGIN,
    metric_keys: Sequence[str] | None = None,
    include_suspect: bool = False,
) -> Comparison:
    """Check, group into sides, and judge every metric (or only `metric_keys`) of every candidate
    side.

    `runs` are run rows (as `queries.load_runs` returns them); `baseline_ids` picks the baseline
    side. The reference run is the first measured baseline run: every other run is checked
    against it, and runs that are not comparable (or not finished) are left out, with a reason.
    A suspect run (numbers that cannot be true) gives no values unless `include_suspect`.
    """
    slo = dict(slo_ms or {})
    base_set = {int(i) for i in baseline_ids}
    base_runs = [r for r in runs if int(r["id"]) in base_set]
    if not base_runs:
        raise ValueError("pick at least one baseline run")
    ref = next((r for r in base_runs if counted(r, include_suspect)), base_runs[0])
    checks: list[PairCheck] = []
    baseline_members: list[Run] = [ref]
    groups: dict[tuple[tuple[str, str], ...], list[Run]] = {}
    group_info: dict[tuple[tuple[str, str], ...], tuple[str | None, Any]] = {}
    for run in runs:
        if int(run["id"]) == int(ref["id"]):
            continue
        check = _check(ref, run, base_set)
        checks.append(check)
        if not check.comparable:
            continue
        if int(run["id"]) in base_set:
            baseline_members.append(run)
            continue
        key = tuple(sorted((k, repr(norm_value(b))) for k, (_, b) in check.changed.items()))
        groups.setdefault(key, []).append(run)
        name, (_, value) = next(iter(check.changed.items()), (None, (None, None)))
        group_info[key] = (name, value)
    params = {k for key in groups for k, _ in key}
    param = next(iter(params)) if len(params) == 1 else (ref.get("param") if not params else None)
    # The baseline's label names its value of the parameter the candidates change.
    base_param = param or ref.get("param")
    if param and ref.get("param") != param:
        base_value = run_parameters(ref).get(param)
    else:
        base_value = ref.get("value")
    baseline = _make_side(
        _side_label(base_param, base_value),
        base_param,
        base_value,
        baseline_members,
        slo,
        requests,
        include_suspect,
    )
    changed = {k for key in groups for k, _ in key} | ({base_param} if base_param else set())
    baseline.not_applied = not_applied(baseline_members, changed)
    candidates: list[Side] = []
    for key, members in groups.items():
        name, value = group_info[key]
        label = _side_label(name, value) if name else f"{baseline.label} (A/A repeat)"
        side = _make_side(label, name, value, members, slo, requests, include_suspect)
        side.not_applied = not_applied(members, {k for k, _ in key})
        candidates.append(side)
    candidates.sort(key=lambda s: _sort_key(s.value))
    shown = [
        x
        for x in METRICS
        if (metric_keys is None or x.key in metric_keys)
        and any(s.values.get(x.key) for s in [baseline, *candidates])
    ]
    changes = {
        (side.label, metric.key): _unapplied(baseline, side, metric)
        or bootstrap_change(
            baseline.values[metric.key],
            side.values[metric.key],
            metric.better,
            confidence=confidence,
            resamples=resamples,
            seed=seed,
            margin=margin,
            metric_scale=metric.scale,
        )
        for side in candidates
        for metric in shown
    }
    return Comparison(
        baseline=baseline,
        candidates=candidates,
        checks=checks,
        metrics=shown,
        changes=changes,
        slo_ms=slo,
        confidence=confidence,
        param=param,
        load_windows=_load_windows(runs),
        margin=margin,
        drift=baseline_drift(baseline_members, baseline.per_run, shown),
    )


def _unapplied(baseline: Side, side: Side, metric: Metric) -> Change | None:
    """No verdict when either side's value did not reach its engine: the runs measured something
    else than the comparison claims."""
    reasons = [*baseline.not_applied, *side.not_applied]
    if not reasons:
        return None
    b, c = baseline.stats(metric.key), side.stats(metric.key)
    return Change(
        base_mean=b["mean"],
        cand_mean=c["mean"],
        rel_change=None,
        rel_low=None,
        rel_high=None,
        diff_low=None,
        diff_high=None,
        n_base=int(b["n"] or 0),
        n_cand=int(c["n"] or 0),
        verdict="not applied",
        note="not applied by the engine: " + "; ".join(reasons),
    )


def _sort_key(value: str | None) -> tuple[int, float, str]:
    if value is None:
        return (0, 0.0, "")
    try:
        return (1, float(value), value)
    except ValueError:
        return (2, 0.0, value)


def numeric_values(comparison: Comparison) -> bool:
    """True when every side's value is a number: the knee chart makes sense."""
    values = [s.value for s in comparison.sides]
    try:
        return all(v is not None and math.isfinite(float(v)) for v in values)
    except ValueError:
        return False


def _config_key(run: Run) -> tuple[Any, Any, Any]:
    """Runs with the same key are repeats of one configuration of one experiment."""
    return (run.get("experiment_id"), run.get("param"), run.get("value"))


def repeats_of(runs: Sequence[Run], run_id: int) -> list[int]:
    """`run_id` and its repeats among `runs`."""
    ref = next(r for r in runs if int(r["id"]) == int(run_id))
    return [int(r["id"]) for r in runs if _config_key(r) == _config_key(ref)]


def _seq_key(run: Run) -> tuple[int, int]:
    seq = run.get("seq")
    return (seq if seq is not None else 1 << 30, int(run["id"]))


def default_baseline(runs: Sequence[Run]) -> list[int]:
    """The runs of the first value (lowest seq): how an experiment lists its baseline first."""
    ordered = sorted(runs, key=_seq_key)
    return [int(r["id"]) for r in ordered if _config_key(r) == _config_key(ordered[0])]


def request_columns(db: Any, run_id: int, with_itl: bool = False) -> m.Columns:
    """A run's request rows as metrics.Columns; without ITL unless asked (goodput needs none)."""
    return m.columns(queries.request_rows(db, run_id, with_itl))


def request_loader(db: Any) -> RequestLoader:
    """A loader bound to one connection, for build_comparison(requests=...)."""
    return lambda run_id: request_columns(db, run_id)
