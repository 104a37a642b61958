"""`python -m tuning compare ...` and `python -m tuning chart ...`: the Compare page for shells,
scripts and headless GPU boxes, from the same code (tuning.compare.comparison, tuning.charts.build, tuning.output.export).

    compare --db lab.db [--json] [--baseline RUN_ID] [--slo ttft:500 --slo tpot:50] RUN_ID ...
    compare --db lab.db --experiment 3
    chart   --db lab.db --kind throughput|latency|cdf|memory|kv|knee --out FILE.png|.svg|.html RUN_ID ...
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuning.settings import default_db_path

# Kept here, not imported from charts.py, so the CLI starts without Altair and pandas (a headless GPU
# box needs neither to run experiments); a test checks the two lists agree.
CHART_KINDS = ("throughput", "latency", "cdf", "memory", "kv", "knee")

COMMANDS = ("compare", "chart")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "run_ids",
        nargs="*",
        type=int,
        metavar="RUN_ID",
        help="runs to compare (baseline and candidates)",
    )
    p.add_argument(
        "--experiment",
        type=int,
        default=None,
        help="take every run of this experiment (added to RUN_IDs)",
    )
    p.add_argument(
        "--baseline",
        type=int,
        default=None,
        metavar="RUN_ID",
        help="the baseline side is this run and its listed repeats (default: the runs "
        "of the first value)",
    )
    p.add_argument(
        "--slo",
        action="extend",
        nargs="+",
        metavar="METRIC:MS",
        help="SLOs for goodput, e.g. --slo ttft:500 tpot:50 (ttft, tpot, e2el; "
        "repeatable); goodput is recomputed from the stored request rows",
    )
    p.add_argument(
        "--db", type=Path, default=None, help=f"the lab's SQLite file (default {default_db_path()})"
    )


def add_arguments(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add `compare` and `chart` to the CLI's subparsers."""
    cmp = sub.add_parser(
        "compare",
        help="baseline vs candidates with verdicts "
        "(better / worse / no clear difference / inconclusive)",
    )
    _common(cmp)
    cmp.add_argument("--json", action="store_true", help="the comparison as JSON")
    chart = sub.add_parser("chart", help="export one comparison chart as PNG, SVG or HTML")
    _common(chart)
    chart.add_argument("--kind", choices=CHART_KINDS, required=True)
    chart.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="FILE.png, FILE.svg or FILE.html (standalone, works offline)",
    )
    chart.add_argument(
        "--error",
        choices=["ci", "minmax"],
        default="ci",
        help="error bars: 95 %% CI of the mean (default) or min-max of the runs",
    )


def _load(args: argparse.Namespace) -> tuple[Any, Any]:
    """(db, Comparison) for the runs the arguments name; ValueError says what is wrong."""
    from store import StoreError, open_db, queries
    from tuning.compare.comparison import (
        build_comparison,
        default_baseline,
        parse_slo,
        request_loader,
    )

    path = args.db or default_db_path()
    if not Path(path).exists():
        raise ValueError(f"no lab database at {path}")
    db = open_db(path, readonly=True)
    # `--slo ttft:500 12 13` hands the run ids to --slo (nargs="+"): take them back.
    slo_items = [x for x in (args.slo or []) if not x.strip().isdigit()]
    ids = list(
        dict.fromkeys(
            [*(args.run_ids or []), *(int(x) for x in (args.slo or []) if x.strip().isdigit())]
        )
    )
    if args.experiment is not None:
        ids += [i for i in queries.experiment_run_ids(db, args.experiment) if i not in ids]
    if args.baseline is not None and args.baseline not in ids:
        ids.insert(0, args.baseline)
    if not ids:
        raise ValueError("name some runs (RUN_ID ...) or --experiment ID")
    try:
        runs = queries.load_runs(db, ids)
    except StoreError as exc:
        raise ValueError(str(exc)) from None
    if args.baseline is not None:
        ref = next(r for r in runs if int(r["id"]) == args.baseline)
        key = (ref.get("experiment_id"), ref.get("param"), ref.get("value"))
        base = [
            int(r["id"])
            for r in runs
            if (r.get("experiment_id"), r.get("param"), r.get("value")) == key
        ]
    else:
        base = default_baseline(runs)
    slo = parse_slo(slo_items)
    comparison = build_comparison(runs, base, slo_ms=slo, requests=request_loader(db))
    return db, comparison


def _num(value: Any, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / 2**30:,.2f} GiB"
    if unit == "fraction":
        return f"{value * 100:,.1f} %"
    if unit in ("count", "tokens") and float(value).is_integer():
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def format_comparison(comparison: Any) -> str:
    """The comparison as a plain-text report: checks first, then one table per candidate."""
    lines: list[str] = []
    sides = comparison.sides
    n_runs = sum(len(s.run_ids) for s in sides)
    if comparison.excluded:
        lines.append(f"Not comparable ({len(comparison.excluded)} run(s) left out):")
        for check in comparison.excluded:
            lines.append(
                f"  run {check.run_id} vs baseline run {check.baseline_id}: {check.reason}"
            )
    else:
        lines.append(
            f"Comparable: all {n_runs} runs share workload, model, engine, vLLM "
            f"version and hardware; one parameter differs"
            + (f": {comparison.param}" if comparison.param else "")
        )
    if comparison.slo_ms:
        lines.append(
            "Goodput SLOs: " + ", ".join(f"{k} <= {v:g} ms" for k, v in comparison.slo_ms.items())
        )
    b = comparison.baseline
    lines.append(
        f"Baseline: {b.label} (runs {' '.join(map(str, b.run_ids))}; "
        f"{len(b.measured_ids)} measured)"
    )
    pct = f"{comparison.confidence * 100:.0f}%"
    for side in comparison.candidates:
        lines.append("")
        lines.append(
            f"Candidate: {side.label} (runs {' '.join(map(str, side.run_ids))}; "
            f"{len(side.measured_ids)} measured)"
        )
        for f in side.failed:
            lines.append(
                f"  run {f['run_id']} produced no measurement: {f['status']}"
                + (f" [{f['kind']}] {f['reason'] or ''}" if f.get("kind") else "")
            )
        header = (
            f"  {'metric':34} {'baseline':>12} {'candidate':>12} {'change':>9}  "
            f"verdict ({pct} CI of the change)"
        )
        lines.append(header)
        for metric in comparison.metrics:
            ch = comparison.changes.get((side.label, metric.key))
            if ch is None:
                continue
            name = (
                f"{metric.label} ({metric.unit})"
                if metric.unit not in ("bytes", "fraction")
                else metric.label
            )
            change = "-" if ch.rel_change is None else f"{ch.rel_change * 100:+.1f}%"
            ci = ""
            if ch.rel_low is not None and ch.rel_high is not None:
                ci = f" ({ch.rel_low * 100:+.1f} … {ch.rel_high * 100:+.1f}%)"
            lines.append(
                f"  {name[:34]:34} {_num(ch.base_mean, metric.unit):>12} "
                f"{_num(ch.cand_mean, metric.unit):>12} {change:>9}  {ch.verdict}{ci}"
            )
    if not comparison.candidates:
        lines.append("No candidate side: name runs of another value.")
    lines.append("")
    lines.append(
        "Verdicts: the 95% CI is the wider of a bootstrap over runs (2000 resamples) and "
        "Welch's t-interval; one run per side is inconclusive; a change under 2% or a CI "
        "that includes 0 is no clear difference."
    )
    return "\n".join(lines)


def _compare(args: argparse.Namespace) -> int:
    from tuning.output.export import comparison_json

    try:
        _db, comparison = _load(args)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    if args.json:
        sys.stdout.write(comparison_json(comparison).decode("utf-8") + "\n")
    else:
        print(format_comparison(comparison))
    return 0


def _chart(args: argparse.Namespace) -> int:
    from tuning.charts.build import build_chart
    from tuning.output.export import write_chart

    out = str(args.out)
    if not out.lower().endswith((".png", ".svg", ".html")):
        print(f"refused: --out must end in .png, .svg or .html, got {out!r}", file=sys.stderr)
        return 2
    try:
        db, comparison = _load(args)
    except ValueError as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 2
    chart = build_chart(db, comparison, args.kind, error=args.error)
    if chart is None:
        print(f"no data for a {args.kind} chart of these runs", file=sys.stderr)
        return 1
    fmt = write_chart(chart, out)
    print(f"wrote {out} ({fmt})")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch `compare` or `chart` (args.command)."""
    if args.command == "compare":
        return _compare(args)
    if args.command == "chart":
        return _chart(args)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    """Standalone entry for tests (`python -m tuning` wires add_arguments and run)."""
    parser = argparse.ArgumentParser(prog="python -m tuning")
    sub = parser.add_subparsers(dest="command", required=True)
    add_arguments(sub)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
