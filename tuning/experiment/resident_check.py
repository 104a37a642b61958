"""The check of resident engines (issue 38, item 4): on this machine, do runs on a server that was
switched to (slept, then woken) give the numbers a freshly started server gives?

Each value's stored runs are split by how their server came to serve them (`startup_json`'s
`resident`: "start", a real start with the resident configuration; "switch", a woken server) and
the two sides are judged metric by metric over the experiment's primary metrics (its objective
and guards) by the lab's own verdict rule (tuning.compare.stats.bootstrap_change, its margin and
confidence, runs as the unit): the restarted runs are the baseline, the switched ones the
candidate. The check *differs* when any value's metric is decided other than equivalent (better,
worse, changed): switching changed the numbers, and the experiment restarts from then on. It is
*equivalent* when every one is decided equivalent, and *undecided* otherwise (too few runs a
side: said with the numbers, and switching goes on).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.status import Status
from tuning.compare.catalog import METRIC_BY_KEY
from tuning.compare.present import pct_number
from tuning.compare.stats import bootstrap_change

START, SWITCH = "start", "switch"


def how_served(run: Mapping[str, Any]) -> str | None:
    """ "start" or "switch" for a run of a resident server; None for any other run."""
    startup = run.get("startup")
    mode = startup.get("resident") if isinstance(startup, Mapping) else None
    return mode if mode in (START, SWITCH) else None


def _number(run: Mapping[str, Any], key: str) -> float | None:
    value = run.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def resident_check(runs: Sequence[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """The check over an experiment's stored runs: per value and metric, the restarted and the
    switched runs' means, the interval of the change and the verdict; the whole check's verdict
    (equivalent, differs, undecided) and, when it differs, why in words."""
    done = [r for r in runs if r.get("status") == Status.DONE and how_served(r)]
    labels = list(dict.fromkeys(str(r.get("value")) for r in done))
    values: dict[str, Any] = {}
    verdicts: list[str] = []
    differs: list[str] = []
    for label in labels:
        mine = [r for r in done if str(r.get("value")) == label]
        started = [r for r in mine if how_served(r) == START]
        switched = [r for r in mine if how_served(r) == SWITCH]
        per_metric: dict[str, Any] = {}
        for key in metrics:
            metric = METRIC_BY_KEY.get(key)
            if metric is None:
                continue
            base = [v for v in (_number(r, key) for r in started) if v is not None]
            cand = [v for v in (_number(r, key) for r in switched) if v is not None]
            change = bootstrap_change(
                base, cand, metric.better, metric_scale=metric.scale, estimate=False
            )
            verdicts.append(change.verdict)
            per_metric[key] = {
                "verdict": change.verdict,
                "restarted": base,
                "switched": cand,
                "restarted_mean": change.base_mean,
                "switched_mean": change.cand_mean,
                "rel_low": change.rel_low,
                "rel_high": change.rel_high,
                "margin": change.margin,
                "confidence": change.confidence,
            }
            if change.verdict in ("better", "worse", "changed"):
                differs.append(_words(label, metric.label, change.rel_low, change.rel_high))
        values[label] = {"restarted_runs": len(started), "switched_runs": len(switched)}
        values[label]["metrics"] = per_metric
    if differs:
        verdict = "differs"
    elif verdicts and all(v == "equivalent" for v in verdicts):
        verdict = "equivalent"
    else:
        verdict = "undecided"
    return {
        "verdict": verdict,
        "why": "; ".join(differs) or None,
        "metrics": list(metrics),
        "values": values,
    }


def _words(label: str, metric: str, low: float | None, high: float | None) -> str:
    span = ""
    if low is not None and high is not None:
        span = f" ({pct_number(low * 100)} % .. {pct_number(high * 100)} %)"
    return f"{metric} of {label}: switched runs differ from restarted ones{span}"
