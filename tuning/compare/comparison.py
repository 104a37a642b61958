"""Comparability, deltas and verdicts: is a candidate really better than the baseline?

Three steps, all without Streamlit:

1. **Comparability.** A candidate run is compared with the baseline only when the workload
   (fingerprint), model, engine and its vLLM version and hardware are the same and exactly one
   parameter differs (the resolved server config, plus the workload parameters of the registry).
   Zero differences is an A/A comparison, which is allowed: it measures the noise.
2. **Sides.** Runs are grouped into sides: all runs (repeats) of one configuration. The baseline is
   one side; every distinct changed value is a candidate side.
3. **Verdicts.** Per metric, the relative change of the side means, with a bootstrap confidence
   interval. *The bootstrap unit is the run*: each run's summary number (its mean TTFT, its output
   throughput, ...) is one observation, because repeats (separate server starts) are the
   independent units; the requests of one run share a server, a warm-up and a moment of machine
   noise, so resampling requests would overstate the confidence. Verdict rule:

   - either side has fewer than ``min_runs`` (2) measured runs -> "inconclusive";
   - the bootstrap CI of the difference of means excludes 0, so does Welch's t-interval (the
     bootstrap alone is far too confident with 2-4 runs a side), and the change is at least ``min_effect``
     (2 %, measured symmetrically as |log(mean_c / mean_b)|) -> "better" or "worse" by the metric's
     direction;
   - otherwise -> "no clear difference".

   Each side's resamples come from a generator seeded by the side's own (sorted) values, so the
   result does not depend on which side is the baseline: swapping them negates every draw and flips
   better <-> worse exactly.

The loaders at the bottom read only the columns the dashboard needs, so a compare of 20 runs in a
database of 1,000 runs and a million request rows stays fast.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from store import queries
from tuning import metrics as m
from tuning.params import PARAMS, format_value

Direction = Literal["lower", "higher"]
VerdictName = Literal["better", "worse", "no clear difference", "inconclusive"]

CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 20240601
MIN_EFFECT = 0.02
MIN_RUNS = 2

# Registry name of each workload parameter -> Workload field name.
WORKLOAD_PARAMS: dict[str, str] = {
    name: name.replace("-", "_") for name, p in PARAMS.items() if p.kind == "workload"
}
# Workload fields that are not a tunable parameter: a difference there is a different workload.
_WORKLOAD_IGNORED = {"request_timeout_s"}


@dataclass(frozen=True)
class Metric:
    """One row of the comparison table; `better` says which way is an improvement."""

    key: str
    label: str
    unit: str
    better: Direction
    formula: str
    group: str


_LAT_FORMULA = {
    "ttft": "TTFT = first token's arrival − request start, per request",
    "tpot": "TPOT = (E2EL − TTFT) / (output tokens − 1), per request with > 1 output token",
    "itl": "ITL = every gap between consecutive streamed chunks, pooled over requests",
    "e2el": "E2EL = last token's arrival − request start, per request",
}
_STAT_LABEL = {"mean": "mean", "median": "p50", "p99": "p99"}

METRICS: tuple[Metric, ...] = (
    Metric(
        "output_throughput",
        "output throughput",
        "tok/s",
        "higher",
        "successful output tokens / (first dispatch → last completion)",
        "throughput",
    ),
    Metric(
        "request_throughput",
        "request throughput",
        "req/s",
        "higher",
        "completed requests / (first dispatch → last completion)",
        "throughput",
    ),
    Metric(
        "request_goodput",
        "goodput",
        "req/s",
        "higher",
        "requests meeting every SLO / duration (vLLM's goodput; TPOT 0 for 1-token outputs)",
        "throughput",
    ),
    *(
        Metric(
            f"{stat}_{lat}_ms",
            f"{_STAT_LABEL[stat]} {lat.upper()}",
            "ms",
            "lower",
            _LAT_FORMULA[lat] + f"; {_STAT_LABEL[stat]} over the run",
            "latency",
        )
        for lat in ("ttft", "tpot", "itl", "e2el")
        for stat in ("mean", "median", "p99")
    ),
    Metric(
        "peak_gpu_tree_bytes",
        "peak GPU memory (server tree)",
        "bytes",
        "lower",
        "max over samples of device memory held by the server's processes",
        "memory",
    ),
    Metric(
        "peak_tree_rss_bytes",
        "peak RSS (server tree)",
        "bytes",
        "lower",
        "max over samples of the resident memory of the server's process tree",
        "memory",
    ),
    Metric(
        "peak_kv_cache_usage_perc",
        "peak KV-cache usage",
        "fraction",
        "lower",
        "max of vLLM's kv_cache_usage_perc during the load (0–1; lower = more headroom)",
        "memory",
    ),
    Metric(
        "kv_cache_tokens",
        "KV capacity",
        "tokens",
        "higher",
        "tokens the KV cache holds, from vLLM's startup log",
        "memory",
    ),
    Metric(
        "preemptions",
        "preemptions",
        "count",
        "lower",
        "increase of vllm:num_preemptions_total during the load",
        "health",
    ),
    Metric(
        "time_to_healthy_s",
        "time to healthy",
        "s",
        "lower",
        "server start → first successful GET /health",
        "health",
    ),
    Metric(
        "failed",
        "failed requests",
        "count",
        "lower",
        "requests that errored, timed out or ended early",
        "health",
    ),
)
METRIC_BY_KEY: dict[str, Metric] = {x.key: x for x in METRICS}


# --------------------------------------------------------------------------------------------
# Comparability
# --------------------------------------------------------------------------------------------


@dataclass
class PairCheck:
    """One run against the baseline's reference run."""

    run_id: int
    baseline_id: int
    comparable: bool
    reasons: list[str] = field(default_factory=list)
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        return "; ".join(self.reasons)


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


def run_config(run: Mapping[str, Any]) -> dict[str, Any]:
    return _as_dict(run.get("config") if run.get("config") is not None else run.get("config_json"))


def run_workload(run: Mapping[str, Any]) -> dict[str, Any]:
    return _as_dict(
        run.get("workload") if run.get("workload") is not None else run.get("workload_json")
    )


def _norm(value: Any) -> Any:
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


def parameter_diff(
    base: Mapping[str, Any], cand: Mapping[str, Any]
) -> tuple[dict[str, tuple[Any, Any]], dict[str, tuple[Any, Any]]]:
    """(parameter differences, other workload differences) between two runs.

    Parameters are the keys of the resolved server config plus the registry's workload parameters;
    other workload fields (requests, seed, endpoint, warm-ups) are not parameters: a difference
    there means a different workload.
    """
    params: dict[str, tuple[Any, Any]] = {}
    bc, cc = run_config(base), run_config(cand)
    for key in sorted(set(bc) | set(cc)):
        if _norm(bc.get(key)) != _norm(cc.get(key)):
            params[key] = (bc.get(key), cc.get(key))
    bw, cw = run_workload(base), run_workload(cand)
    other: dict[str, tuple[Any, Any]] = {}
    swept = set()
    for name, fld in WORKLOAD_PARAMS.items():
        if _norm(bw.get(fld)) != _norm(cw.get(fld)):
            params[name] = (bw.get(fld), cw.get(fld))
            swept.add(fld)
    for fld in sorted(set(bw) | set(cw)):
        if fld in swept or fld in _WORKLOAD_IGNORED or fld in WORKLOAD_PARAMS.values():
            continue
        if _norm(bw.get(fld)) != _norm(cw.get(fld)):
            other[fld] = (bw.get(fld), cw.get(fld))
    return params, other


def _fmt(value: Any) -> str:
    return "unset" if value is None else format_value(value)


def check_pair(base: Mapping[str, Any], cand: Mapping[str, Any]) -> PairCheck:
    """Is `cand` comparable with `base`? Every reason it is not, in words."""
    reasons: list[str] = []
    for key, label in (
        ("model", "model"),
        ("engine", "engine"),
        ("vllm_version", "vLLM version"),
        ("hardware", "hardware"),
    ):
        a, b = base.get(key), cand.get(key)
        if a and b and a != b:  # unknown on one side (a failed start) cannot contradict
            reasons.append(f"different {label}: {a or 'unknown'} vs {b or 'unknown'}")
    params, other = parameter_diff(base, cand)
    if other:
        reasons.append(
            "different workload: "
            + ", ".join(f"{k} {_fmt(a)} vs {_fmt(b)}" for k, (a, b) in other.items())
        )
    elif not any(name in WORKLOAD_PARAMS for name in params):
        fa, fb = base.get("workload_fingerprint"), cand.get("workload_fingerprint")
        if fa != fb:
            reasons.append(f"different workload fingerprint: {fa or 'none'} vs {fb or 'none'}")
    if len(params) > 1:
        reasons.append(
            f"{len(params)} parameters differ (one at a time): "
            + ", ".join(f"{k} {_fmt(a)} vs {_fmt(b)}" for k, (a, b) in params.items())
        )
    return PairCheck(
        run_id=int(cand["id"]),
        baseline_id=int(base["id"]),
        comparable=not reasons,
        reasons=reasons,
        changed=params,
    )


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """Candidate vs baseline for one metric: point change and bootstrap CI of the change."""

    base_mean: float | None
    cand_mean: float | None
    rel_change: float | None  # (mean_c - mean_b) / mean_b
    rel_low: float | None  # CI of the relative change (None if mean_b can be 0)
    rel_high: float | None
    diff_low: float | None  # CI of mean_c - mean_b
    diff_high: float | None
    n_base: int
    n_cand: int
    verdict: VerdictName
    note: str = ""

    def describe(self, confidence: float = CONFIDENCE) -> str:
        """'worse: +10.2 % (95 % CI +8.1 … +12.3 %)'."""
        if self.rel_change is None:
            change = "n/a"
        else:
            change = f"{self.rel_change * 100:+.1f} %"
        ci = ""
        if self.rel_low is not None and self.rel_high is not None:
            ci = (
                f" ({confidence * 100:.0f} % CI {self.rel_low * 100:+.1f} … "
                f"{self.rel_high * 100:+.1f} %)"
            )
        return f"{self.verdict}: {change}{ci}" + (f" — {self.note}" if self.note else "")


def _side_rng(seed: int, values: np.ndarray) -> np.random.Generator:
    """A generator that depends only on the seed and this side's values, not on its role."""
    return np.random.default_rng([seed, zlib.crc32(values.tobytes()), values.size])


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = _side_rng(seed, values)
    idx = rng.integers(0, values.size, size=(resamples, values.size))
    return values[idx].mean(axis=1)


def bootstrap_change(
    base: Sequence[float],
    cand: Sequence[float],
    better: Direction = "lower",
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    min_effect: float = MIN_EFFECT,
    min_runs: int = MIN_RUNS,
) -> Change:
    """The verdict for one metric from per-run values (one number per run, runs as the unit).

    Each side is resampled with replacement `resamples` times (independently); the percentile CI
    of mean_c* - mean_b* decides the sign, and the relative change must reach `min_effect` so a
    statistically clear but negligible shift is not sold as better or worse.
    """
    b = np.sort(np.asarray([v for v in base if v is not None and math.isfinite(v)], dtype=float))
    c = np.sort(np.asarray([v for v in cand if v is not None and math.isfinite(v)], dtype=float))
    mb = float(b.mean()) if b.size else None
    mc = float(c.mean()) if c.size else None
    rel = None if mb is None or mc is None or mb == 0 else (mc - mb) / mb
    if b.size < min_runs or c.size < min_runs:
        note = (
            "no measured run on one side"
            if not b.size or not c.size
            else f"{min(b.size, c.size)} run on one side: repeat the values to get a verdict"
        )
        return Change(
            mb, mc, rel, None, None, None, None, int(b.size), int(c.size), "inconclusive", note
        )
    alpha = (1.0 - confidence) / 2.0
    bm = _resampled_means(b, resamples, seed)
    cm = _resampled_means(c, resamples, seed)
    diffs = cm - bm
    d_lo, d_hi = (float(x) for x in np.percentile(diffs, [alpha * 100, (1 - alpha) * 100]))
    r_lo = r_hi = None
    if np.all(bm != 0):
        rels = diffs / bm
        r_lo, r_hi = (float(x) for x in np.percentile(rels, [alpha * 100, (1 - alpha) * 100]))
    assert mb is not None and mc is not None
    if mb == mc:
        size = 0.0
    elif mb <= 0 or mc <= 0:
        size = math.inf
    else:
        size = abs(math.log(mc / mb))
    # The interval shown and judged is the wider of the bootstrap's and Welch's.
    w_lo, w_hi = welch_interval(b, c, confidence)
    d_lo, d_hi = min(d_lo, w_lo), max(d_hi, w_hi)
    if r_lo is not None and r_hi is not None and mb != 0:
        r_lo, r_hi = min(r_lo, w_lo / mb), max(r_hi, w_hi / mb)
    clear = (d_lo > 0 or d_hi < 0) and size >= math.log1p(min_effect)
    if not clear:
        verdict: VerdictName = "no clear difference"
    else:
        up = d_lo > 0
        verdict = "better" if up == (better == "higher") else "worse"
    return Change(mb, mc, rel, r_lo, r_hi, d_lo, d_hi, int(b.size), int(c.size), verdict)


# Two-sided 95 % Student t quantiles by degrees of freedom (1..30); beyond that, the normal's.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def welch_interval(
    base: np.ndarray, cand: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """Welch's t-interval of mean_c - mean_b. With 2-4 runs a side the percentile bootstrap is far
    too narrow (two runs give only three possible resampled means), so a verdict also needs this
    interval, which widens honestly with few runs, to exclude 0."""
    nb, nc = base.size, cand.size
    diff = float(cand.mean() - base.mean())
    vb = float(base.var(ddof=1)) / nb if nb > 1 else 0.0
    vc = float(cand.var(ddof=1)) / nc if nc > 1 else 0.0
    se = math.sqrt(vb + vc)
    if se == 0.0:
        return diff, diff
    denom = (vb * vb / (nb - 1) if nb > 1 else 0.0) + (vc * vc / (nc - 1) if nc > 1 else 0.0)
    df = (vb + vc) ** 2 / denom if denom > 0 else float(nb + nc - 2)
    if abs(confidence - 0.95) > 1e-9:
        z = float(np.sqrt(2.0) * _erfinv(confidence))
        t = z * (1.0 + 1.0 / max(df, 1.0))  # rough small-sample widening for other levels
    else:
        k = int(max(1.0, math.floor(df)))
        t = _T975[k - 1] if k <= len(_T975) else 1.96
    return diff - t * se, diff + t * se


def _erfinv(y: float) -> float:
    """Inverse error function (Winitzki's approximation, enough for an interval's width)."""
    a = 0.147
    ln = math.log(1.0 - y * y)
    first = 2.0 / (math.pi * a) + ln / 2.0
    return math.copysign(math.sqrt(math.sqrt(first * first - ln / a) - first), y)


def fmt_value(value: float | None, unit: str) -> str:
    """A metric value in its unit, as the Compare page, the CLI table and the report write it."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if unit == "bytes":
        return f"{value / 2**30:,.2f} GiB"
    if unit == "fraction":
        return f"{value * 100:,.1f} %"
    if unit in ("count", "tokens"):
        return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"
    if abs(value) >= 100:
        return f"{value:,.0f} {unit}"
    return f"{value:,.2f} {unit}"


VERDICT_LABEL = {
    "better": "▲ better",
    "worse": "▼ worse",
    "no clear difference": "≈ no clear difference",
    "inconclusive": "? inconclusive",
}


@dataclass(frozen=True)
class NoiseFloor:
    """How much one configuration moves between repeats (the A/A noise)."""

    n: int
    mean: float | None
    cv: float | None  # std (ddof=1) / mean across runs
    min_detectable: float | None  # ~ smallest relative change two sides of n runs can resolve


def noise_floor(values: Sequence[float], confidence: float = CONFIDENCE) -> NoiseFloor:
    """From repeats of one configuration: z * cv * sqrt(2 / n) is roughly the smallest relative
    change a comparison of two sides of n runs each could call (why a 1 % win needs many repeats)."""
    arr = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if arr.size < 2 or arr.mean() == 0:
        return NoiseFloor(int(arr.size), float(arr.mean()) if arr.size else None, None, None)
    cv = float(arr.std(ddof=1) / abs(arr.mean()))
    z = _z(confidence)
    return NoiseFloor(int(arr.size), float(arr.mean()), cv, z * cv * math.sqrt(2.0 / arr.size))


def _z(confidence: float) -> float:
    """Normal quantile without scipy (Acklam-free: bisection on erf is plenty here)."""
    target = 0.5 + confidence / 2.0
    lo, hi = 0.0, 10.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if 0.5 * (1 + math.erf(mid / math.sqrt(2))) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --------------------------------------------------------------------------------------------
# Sides and the comparison
# --------------------------------------------------------------------------------------------


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

    def mean_ci(
        self, key: str, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = SEED
    ) -> tuple[float, float] | None:
        """Bootstrap percentile CI of this side's mean (runs as the unit); None under 2 runs."""
        vals = np.sort(np.asarray(self.values.get(key) or [], dtype=float))
        if vals.size < 2:
            return None
        alpha = (1.0 - confidence) / 2.0
        means = _resampled_means(vals, resamples, seed)
        lo, hi = np.percentile(means, [alpha * 100, (1 - alpha) * 100])
        return float(lo), float(hi)

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

    @property
    def excluded(self) -> list[PairCheck]:
        return [c for c in self.checks if not c.comparable]

    @property
    def sides(self) -> list[Side]:
        return [self.baseline, *self.candidates]

    def rows(self) -> list[dict[str, Any]]:
        """Long format, one row per side and metric: what CSV and JSON exports carry."""
        out: list[dict[str, Any]] = []
        for side in self.sides:
            is_base = side is self.baseline
            for metric in self.metrics:
                st = side.stats(metric.key)
                row: dict[str, Any] = {
                    "side": side.label,
                    "role": "baseline" if is_base else "candidate",
                    "parameter": side.param,
                    "value": side.value,
                    "runs": len(side.run_ids),
                    "measured_runs": len(side.measured_ids),
                    "failed_runs": len(side.failed),
                    "metric": metric.key,
                    "metric_label": metric.label,
                    "unit": metric.unit,
                    "better": metric.better,
                    "mean": st["mean"],
                    "min": st["min"],
                    "max": st["max"],
                    "n": st["n"],
                    "change_pct": None,
                    "ci_low_pct": None,
                    "ci_high_pct": None,
                    "verdict": None,
                    "confidence": self.confidence,
                    "run_ids": " ".join(map(str, side.run_ids)),
                }
                ch = self.changes.get((side.label, metric.key))
                if ch is not None:
                    row.update(
                        change_pct=None if ch.rel_change is None else ch.rel_change * 100,
                        ci_low_pct=None if ch.rel_low is None else ch.rel_low * 100,
                        ci_high_pct=None if ch.rel_high is None else ch.rel_high * 100,
                        verdict=ch.verdict,
                    )
                out.append(row)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "parameter": self.param,
            "confidence": self.confidence,
            "slo_ms": self.slo_ms,
            "bootstrap": {
                "unit": "run",
                "resamples": RESAMPLES,
                "statistic": "mean",
                "min_effect": MIN_EFFECT,
                "min_runs": MIN_RUNS,
            },
            "baseline": {"label": self.baseline.label, "run_ids": self.baseline.run_ids},
            "candidates": [{"label": s.label, "run_ids": s.run_ids} for s in self.candidates],
            "not_comparable": [
                {"run_id": c.run_id, "baseline_id": c.baseline_id, "reasons": c.reasons}
                for c in self.excluded
            ],
            "rows": self.rows(),
        }


RequestLoader = Callable[[int], "m.Columns"]


def parse_slo(items: Iterable[str] | None) -> dict[str, float]:
    """['ttft:200', 'tpot:50,e2el:2000'] -> {'ttft': 200.0, ...}; ValueError says what is wrong."""
    out: dict[str, float] = {}
    for item in items or []:
        for part in str(item).split(","):
            if not part.strip():
                continue
            name, sep, value = part.strip().partition(":")
            if not sep or name not in m.GOODPUT_METRICS:
                raise ValueError(f"SLO {part!r}: expected ttft:MS, tpot:MS or e2el:MS")
            try:
                ms = float(value)
            except ValueError:
                raise ValueError(f"SLO {part!r}: {value!r} is not a number") from None
            if not (ms > 0 and math.isfinite(ms)):
                raise ValueError(f"SLO {part!r}: must be a positive number of ms")
            out[name] = ms
    return out


def _measured(run: Mapping[str, Any]) -> bool:
    return run.get("status") == "done" and run.get("completed") is not None


def run_metric_values(
    run: Mapping[str, Any], slo_ms: Mapping[str, float], requests: RequestLoader | None
) -> dict[str, float | None]:
    """One number per metric for one run, from its stored summary columns (never recomputed)
    except goodput, which depends on the SLO and is recomputed from the stored request rows."""
    out: dict[str, float | None] = {}
    for metric in METRICS:
        if metric.key == "request_goodput":
            continue
        v = run.get(metric.key)
        out[metric.key] = (
            float(v)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            else None
        )
    out["request_goodput"] = None
    if slo_ms and requests is not None and run.get("duration"):
        cols = requests(int(run["id"]))
        if cols.n:
            out["request_goodput"] = m.goodput(cols, float(run["duration"]), slo_ms)[
                "request_goodput"
            ]
    return out


def _side_label(param: str | None, value: Any) -> str:
    return f"{param} = {_fmt(value)}" if param else "baseline"


def build_comparison(
    runs: Sequence[Mapping[str, Any]],
    baseline_ids: Sequence[int],
    *,
    slo_ms: Mapping[str, float] | None = None,
    requests: RequestLoader | None = None,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    min_effect: float = MIN_EFFECT,
) -> Comparison:
    """Check, group into sides, and judge every metric of every candidate side.

    `runs` are run rows (as `load_runs` returns them); `baseline_ids` picks the baseline side. The
    reference run is the first measured baseline run: every other run is checked against it, and
    runs that are not comparable (or not finished) are left out, each with its reason.
    """
    slo = dict(slo_ms or {})
    base_set = {int(i) for i in baseline_ids}
    by_id = {int(r["id"]): r for r in runs}
    base_runs = [by_id[i] for i in by_id if i in base_set]
    if not base_runs:
        raise ValueError("pick at least one baseline run")
    ref = next((r for r in base_runs if _measured(r)), base_runs[0])
    checks: list[PairCheck] = []
    groups: dict[tuple[tuple[str, str], ...], list[Mapping[str, Any]]] = {}
    group_info: dict[tuple[tuple[str, str], ...], tuple[str | None, Any]] = {}
    baseline_members: list[Mapping[str, Any]] = [ref]
    for run in runs:
        rid = int(run["id"])
        if rid == int(ref["id"]):
            continue
        check = check_pair(ref, run)
        status = run.get("status")
        if status in ("running", "pending", "queued"):
            check.comparable = False
            check.reasons.append(f"not finished (status {status})")
        elif status == "cancelled":
            check.comparable = False
            check.reasons.append("cancelled: its load was cut short")
        if rid in base_set and check.comparable and check.changed:
            check.comparable = False
            check.reasons.append(
                "picked as baseline but not a repeat of it: "
                + ", ".join(f"{k} {_fmt(a)} vs {_fmt(b)}" for k, (a, b) in check.changed.items())
            )
        checks.append(check)
        if not check.comparable:
            continue
        if rid in base_set:
            baseline_members.append(run)
            continue
        key = tuple(sorted((k, repr(_norm(b))) for k, (_, b) in check.changed.items()))
        groups.setdefault(key, []).append(run)
        if check.changed:
            name, (_, value) = next(iter(check.changed.items()))
            group_info[key] = (name, value)
        else:
            group_info[key] = (None, None)
    params = {k for key in groups for k, _ in key}
    param = next(iter(params)) if len(params) == 1 else (ref.get("param") if not params else None)
    # The baseline's label names its value of the parameter the candidates change.
    base_cfg = {
        **run_config(ref),
        **{n: run_workload(ref).get(f) for n, f in WORKLOAD_PARAMS.items()},
    }
    if param and ref.get("param") != param:
        base_value = base_cfg.get(param)
    else:
        base_value = ref.get("value")
    base_label = _side_label(param or ref.get("param"), base_value)
    cache: dict[int, dict[str, float | None]] = {}

    def make_side(label: str, p: str | None, value: Any, members: list[Mapping[str, Any]]) -> Side:
        side = Side(
            label=label,
            param=p,
            value=None if value is None else _fmt(value),
            run_ids=[int(r["id"]) for r in members],
            measured_ids=[],
            failed=[],
            values={k.key: [] for k in METRICS},
        )
        for r in members:
            rid = int(r["id"])
            if not _measured(r):
                side.failed.append(
                    {
                        "run_id": rid,
                        "status": r.get("status"),
                        "kind": r.get("failure_kind"),
                        "reason": r.get("failure_reason"),
                    }
                )
                continue
            side.measured_ids.append(rid)
            if rid not in cache:
                cache[rid] = run_metric_values(r, slo, requests)
            for key, v in cache[rid].items():
                side.per_run.setdefault(key, {})[rid] = v
                if v is not None:
                    side.values[key].append(v)
        return side

    baseline = make_side(base_label, param or ref.get("param"), base_value, baseline_members)
    candidates: list[Side] = []
    for key, members in groups.items():
        name, value = group_info[key]
        label = _side_label(name, value) if name else f"{baseline.label} (A/A repeat)"
        candidates.append(make_side(label, name, value, members))
    candidates.sort(key=lambda s: _sort_key(s.value))
    shown = [x for x in METRICS if any(s.values.get(x.key) for s in [baseline, *candidates])]
    changes: dict[tuple[str, str], Change] = {}
    for side in candidates:
        for metric in shown:
            changes[(side.label, metric.key)] = bootstrap_change(
                baseline.values[metric.key],
                side.values[metric.key],
                metric.better,
                confidence=confidence,
                resamples=resamples,
                seed=seed,
                min_effect=min_effect,
            )
    windows = {}
    for run in runs:
        window = (
            (run.get("summary") or {}).get("load_window_s")
            if isinstance(run.get("summary"), Mapping)
            else None
        )
        if (
            isinstance(window, (list, tuple))
            and len(window) == 2
            and all(isinstance(x, (int, float)) for x in window)
        ):
            windows[int(run["id"])] = (float(window[0]), float(window[1]))
    return Comparison(
        baseline=baseline,
        candidates=candidates,
        checks=checks,
        metrics=shown,
        changes=changes,
        slo_ms=slo,
        confidence=confidence,
        param=param,
        load_windows=windows,
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
        return all(v is not None for v in values) and all(
            math.isfinite(float(v)) for v in values if v is not None
        )
    except ValueError:
        return False


def default_baseline(runs: Sequence[Mapping[str, Any]]) -> list[int]:
    """The runs of the first value (lowest seq): how an experiment lists its baseline first."""
    if not runs:
        return []
    ordered = sorted(
        runs, key=lambda r: (r.get("seq") if r.get("seq") is not None else 1 << 30, int(r["id"]))
    )
    first = ordered[0]
    key = (first.get("experiment_id"), first.get("param"), first.get("value"))
    return [
        int(r["id"])
        for r in ordered
        if (r.get("experiment_id"), r.get("param"), r.get("value")) == key
    ]


# --------------------------------------------------------------------------------------------
# Loaders: only the columns the dashboard needs
# --------------------------------------------------------------------------------------------


# The sample series the dashboard draws, probed per run before a chart is offered.
DASHBOARD_SERIES: tuple[str, ...] = (
    "tree_rss_bytes",
    "gpu_tree_bytes",
    "gpu_used_bytes",
    "kv_cache_usage_perc",
    "generation_tokens_total",
    "num_requests_running",
    "num_requests_waiting",
)


def available_series(db: Any, run_ids: Iterable[int]) -> set[str]:
    return queries.available_series(db, run_ids, DASHBOARD_SERIES)


def request_columns(db: Any, run_id: int, with_itl: bool = False) -> m.Columns:
    """A run's request rows as metrics.Columns; without ITL unless asked (goodput needs none)."""
    return m.columns(queries.request_rows(db, run_id, with_itl))


def request_loader(db: Any) -> RequestLoader:
    """A loader bound to one connection, for build_comparison(requests=...)."""
    return lambda run_id: request_columns(db, run_id)


def latency_sample(db: Any, run_id: int, max_rows: int = 2000) -> dict[str, np.ndarray]:
    """Per-request TTFT, TPOT, E2EL (ms) of successful requests, thinned to about `max_rows`."""
    rows = queries.latency_rows(db, run_id, max_rows)
    if not rows:
        empty = np.zeros(0)
        return {"ttft": empty, "tpot": empty, "e2el": empty}
    arr = np.asarray(rows, dtype=float)
    start, ttft, end, out = arr[:, 0], arr[:, 1], arr[:, 2], arr[:, 3]
    good = ~np.isnan(ttft) & ~np.isnan(end)
    e2el = (end - start)[good]
    tt = ttft[good]
    long = out[good] > 1
    tpot = (e2el[long] - tt[long]) / (out[good][long] - 1)
    return {"ttft": tt * 1000.0, "tpot": tpot * 1000.0, "e2el": e2el * 1000.0}
