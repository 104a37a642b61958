"""`tuning-lab chart --kind pareto|search`: the trade-off views
(tuning.present.charts.tradeoff).

chart --kind pareto --db lab.db --experiment 3 [--view ttft|per_user] --out front.png
      (the runs of experiment 3's workload: every finished run with its fingerprint)
chart --kind pareto --db lab.db --fingerprint FP --out front.html
chart --kind search --db lab.db --search 2 --out search.png   (a search, its chosen value)
chart --kind search --db lab.db --experiment 3 --out sweep.png
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tuning.cli.args import db_path, refused, say

if TYPE_CHECKING:
    from tuning.compare.comparison import Comparison

KINDS = ("pareto", "search")


def add_arguments(chart: argparse.ArgumentParser) -> None:
    """The `chart` flags only the trade-off kinds read."""
    chart.add_argument(
        "--view",
        choices=["ttft", "per_user"],
        default="ttft",
        help="pareto: output throughput vs p99 TTFT (default), or tokens/s per user "
        "(1000 / mean TPOT) vs output throughput",
    )
    chart.add_argument(
        "--fingerprint",
        default=None,
        metavar="FP",
        help="pareto: the workload (default: the selected runs' baseline's)",
    )
    chart.add_argument(
        "--search",
        type=int,
        default=None,
        metavar="ID",
        help="search: the runs of this search (`search`), its chosen value marked",
    )


def add_search_runs(args: argparse.Namespace) -> str | None:
    """--search ID: its step experiments join the selection; an error message, or None."""
    if args.search is None:
        return None
    from store import StoreError, connect, queries
    from tuning.decide.search.record import step_prefix

    try:
        with connect(db_path(args), readonly=True) as db:
            row = queries.get_search(db, args.search)
            steps = queries.search_experiment_ids(db, step_prefix(str(row["key"])))
    except StoreError as exc:
        return str(exc)
    if not steps:
        return f"search {args.search} has no runs yet"
    args.experiment = [*(args.experiment or []), *steps]
    return None


def pareto_only(args: argparse.Namespace, out: str) -> int:
    """--kind pareto --fingerprint FP with no runs named: no comparison needed."""
    from store import StoreError, connect

    try:
        with connect(db_path(args), readonly=True) as db:
            return _write_pareto(db, args.fingerprint, args.view, out)
    except StoreError as exc:
        return refused(str(exc))


def _write_pareto(db: Any, fingerprint: str | None, view: str, out: str) -> int:
    from tuning.compare.context import run_context
    from tuning.present.charts.common import with_context
    from tuning.present.charts.tradeoff import pareto_chart, pareto_frame, tradeoff_runs
    from tuning.present.export import write_chart

    runs = tradeoff_runs(db, fingerprint) if fingerprint else []
    frame = pareto_frame(runs, view) if fingerprint else None
    if frame is None or frame.empty:
        say(f"no finished runs of workload {fingerprint} with both numbers", file=sys.stderr)
        return 1
    # The file travels alone: it says which model, hardware, vLLM and workload it is of.
    chart = with_context(pareto_chart(frame, view, fingerprint or ""), run_context(runs).lines())
    say(f"wrote {out} ({write_chart(chart, out)})")
    front = frame[frame["front"]]
    say(f"non-dominated: runs {', '.join(map(str, front['run']))} of {len(frame)}")
    return 0


def draw(
    args: argparse.Namespace,
    db: Any,
    comparison: Comparison,
    kind: str,
    out: str,
    context: Sequence[str],
) -> int:
    """Draw a trade-off kind for the selected runs and write it to `out`; a metric-vs-value chart
    carries `context` (the selected runs'); a Pareto chart its workload's runs' own."""
    from store import queries

    if kind == "pareto":
        first = queries.load_runs(db, comparison.baseline.run_ids[:1])
        fingerprint = args.fingerprint or (first[0].get("workload_fingerprint") if first else None)
        return _write_pareto(db, fingerprint, args.view, out)
    from tuning.present.charts.common import with_context
    from tuning.present.charts.tradeoff import search_chart
    from tuning.present.export import write_chart

    objective, chosen, slo = "output_throughput", None, None
    if args.search is not None:
        from tuning.decide.search.record import progress

        done = progress(db_path(args), queries.get_search(db, args.search))
        objective, chosen, slo = done.spec.metric, done.chosen, done.spec.slo_ms
    chart = search_chart(
        comparison, objective=objective, chosen=chosen, error=args.error, slo_ms=slo
    )
    say(f"wrote {out} ({write_chart(with_context(chart, context), out)})")
    return 0
