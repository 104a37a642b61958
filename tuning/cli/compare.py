"""`tuning-lab compare ...` and `tuning-lab chart ...`: the Compare page for shells,
scripts and headless GPU boxes, from the same code (tuning.compare, tuning.present.charts,
tuning.present.export).

    compare --db lab.db [--json] [--baseline RUN_ID] [--goodput ttft:500 tpot:50] RUN_ID ...
    compare --db lab.db --experiment 3
    chart   --db lab.db [--kind throughput|latency|cdf|memory|kv|knee] --out FILE.png|.svg|.html
            (without --kind: the throughput comparison, the usual first look)
    chart   --kind pareto|search ... (the trade-off views: tuning.cli.tradeoff)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuning.cli import tradeoff
from tuning.cli.args import add_selection, db_path, printable, refused, say
from tuning.cli.parser import rename_flag
from tuning.present.charts.kinds import CHART_KINDS

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers
    from tuning.compare.comparison import Comparison
    from tuning.compare.selection import Selection
    from tuning.present.model import ReportModel

COMMANDS = ("compare", "chart")
# What `chart` draws when no --kind is given: output throughput per value, the usual first look.
DEFAULT_KIND = "throughput"


def _common(p: argparse.ArgumentParser) -> None:
    add_selection(p, "runs to compare (baseline and candidates)")
    p.add_argument(
        "--baseline",
        type=int,
        default=None,
        metavar="RUN_ID",
        help="the baseline side is this run and its listed repeats (default: the runs "
        "of the first value)",
    )
    p.add_argument(
        "--goodput",
        action="extend",
        nargs="+",
        metavar="METRIC:MS",
        help="SLOs for goodput, as vLLM's bench takes them, e.g. --goodput ttft:500 tpot:50 "
        "(ttft, tpot, e2el; "
        "repeatable); goodput is recomputed from the stored request rows",
    )
    p.add_argument(
        "--include-suspect",
        action="store_true",
        help="count suspect runs (numbers from the server that failed a plausibility check; "
        "`runs` says why) in the sides and verdicts; by default they are listed, not counted",
    )
    rename_flag(p, "--slo", "--goodput")


def add_arguments(sub: Subparsers) -> None:
    """Add `compare` and `chart` to the CLI's subparsers."""
    cmp = sub.add_parser(
        "compare",
        help="baseline vs candidates with verdicts "
        "(better / worse / equivalent / undecided, with the repeats that would decide it; "
        "not applied when the engine did not apply the value)",
    )
    _common(cmp)
    cmp.add_argument(
        "--margin",
        type=margin_pct,
        default=None,
        metavar="PCT",
        help="equivalence margin E in %% of the baseline's mean (default 2): a change whose "
        "95 %% CI lies within ±E %% is 'equivalent'",
    )
    cmp.add_argument("--json", action="store_true", help="the comparison as JSON")
    chart = sub.add_parser("chart", help="export one comparison chart as PNG, SVG or HTML")
    _common(chart)
    chart.add_argument(
        "--kind",
        choices=(*CHART_KINDS, *tradeoff.KINDS),
        default=None,
        help=f"which chart (default: {DEFAULT_KIND}, the throughput comparison)",
    )
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
        help="error bars: the 95 %% interval of the mean the verdicts use (default) or min-max "
        "of the runs",
    )
    tradeoff.add_arguments(chart)


def margin_pct(text: str) -> float:
    """'2' or '2%' -> 0.02; a margin is a positive finite percentage under 100."""
    try:
        pct = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a percentage") from None
    if not 0 < pct < 100:
        raise argparse.ArgumentTypeError(f"{text!r}: the margin must be over 0 and under 100 %")
    return pct / 100.0


def _with_selection(
    args: argparse.Namespace,
    use: Callable[[Any, Selection], int],
    model: Callable[[Any, ReportModel], int] | None = None,
) -> int:
    """Open the lab read-only, select and compare the runs the arguments name; hand both on (or,
    with `model`, the report model built once from them: the decision, its words)."""
    from store import StoreError, connect
    from tuning.compare.selection import select_runs
    from tuning.compare.stats import MARGIN
    from tuning.measure.metrics import parse_slo
    from tuning.present.model import model_of

    # `--goodput ttft:500 12 13` hands the run ids to --goodput (nargs="+"): take them back.
    slo_items = [x for x in (args.goodput or []) if not x.strip().isdigit()]
    stray_ids = [int(x) for x in (args.goodput or []) if x.strip().isdigit()]
    run_ids = [*(args.run_ids or []), *stray_ids]
    margin = getattr(args, "margin", None) or MARGIN
    include_suspect = bool(getattr(args, "include_suspect", False))
    with ExitStack() as stack:
        try:
            slo = parse_slo(slo_items)
            db = stack.enter_context(connect(db_path(args), readonly=True))
            selection = select_runs(
                db,
                run_ids=run_ids,
                experiment_ids=args.experiment or [],
                baseline_ids=[] if args.baseline is None else [args.baseline],
                with_repeats=True,
                slo=slo,
                margin=margin,
                include_suspect=include_suspect,
            )
            if model is None:
                return use(db, selection)
            built = model_of(
                db,
                selection,
                named_runs=bool(run_ids),
                experiment_ids=list(args.experiment or []),
                include_suspect=include_suspect,
                margin=margin,
                db_hint=_db_hint(args),
            )
        except (StoreError, ValueError) as exc:  # no lab there, unknown runs, a bad SLO
            return refused(str(exc))
        return model(db, built)


def _db_hint(args: argparse.Namespace) -> str | None:
    """The --db the user gave, for a command printed back to them (None: the default lab)."""
    given = getattr(args, "db", None)
    return None if given is None else str(given)


def format_comparison(comparison: Comparison, recommendation: str | None = None) -> str:
    """The comparison as a plain-text report: checks first, then one table per candidate (each
    metric's role: objective, guard, or for information, not corrected), then the
    recommendation (keep vLLM's default, set a value, or why neither) when given."""
    from tuning.compare.chunks import chunk_note, is_per_chunk
    from tuning.compare.present import (
        INFORMATION,
        change_text,
        comparability_text,
        drift_text,
        failed_text,
        fmt,
        noise_text,
        not_applied_text,
        reused_text,
        slo_text,
        suspect_text,
        verdict_detail,
        verdict_rule,
    )

    lines = [comparability_text(comparison)]
    lines += [
        f"  run {c.run_id} vs baseline run {c.baseline_id}: {printable(c.reason)}"
        for c in comparison.excluded
    ]
    notes = [not_applied_text(comparison), reused_text(comparison), failed_text(comparison)]
    notes.append(suspect_text(comparison))
    notes.append(slo_text(comparison.slo_ms))
    lines += [text for text in notes if text]
    b = comparison.baseline
    lines.append(
        f"Baseline: {printable(b.label)} (runs {' '.join(map(str, b.run_ids))}; "
        f"{len(b.measured_ids)} measured)"
    )
    for side in comparison.candidates:
        chunks = chunk_note(comparison, side)
        lines += [
            "",
            f"Candidate: {printable(side.label)} (runs {' '.join(map(str, side.run_ids))}; "
            f"{len(side.measured_ids)} measured)",
            f"  {'metric':30} {'role':9} {'baseline':>14} {'candidate':>14} {'change':>10}  "
            "verdict (CI; what would decide it)",
        ]
        for metric in comparison.metrics:
            ch = comparison.changes.get((side.label, metric.key))
            if ch is None:
                continue
            # not applied: the reason is listed above, under "Not applied by the engine"
            detail = (
                ""
                if ch.verdict == "not applied"
                else verdict_detail(ch, comparison.confidence, metric.unit)
            )
            role = comparison.roles.get(metric.key, "info")
            lines.append(
                f"  {metric.label[:30]:30} {role:9} {fmt(ch.base_mean, metric.unit):>14} "
                f"{fmt(ch.cand_mean, metric.unit):>14} {change_text(ch, metric.unit):>10}  "
                f"{ch.verdict}{f' ({detail})' if detail else ''}"
                + (f" · {chunks}" if chunks and is_per_chunk(metric) else "")
            )
    if not comparison.candidates:
        lines.append("No candidate side: name runs of another value.")
    else:
        lines.append(f"  (role info: {INFORMATION}; only the objective and guards decide)")
    lines += ["", text] if (text := drift_text(comparison)) else []
    lines += ["", text] if (text := noise_text(comparison)) else []
    lines += ["", f"Recommendation: {printable(recommendation)}"] if recommendation else []
    lines += ["", verdict_rule(confidence=comparison.confidence, margin=comparison.margin)]
    return "\n".join(lines)


def _compare(args: argparse.Namespace) -> int:
    from tuning.present.export import comparison_json

    def show(db: Any, model: ReportModel) -> int:
        from tuning.experiment.time_spent import report

        comparison, lead = model.comparison, model.headline
        spent = report(db, model.runs)  # where each experiment's time went, and its estimate
        if args.json:
            extra = {**model.extra_json(), "time_spent": spent}
            say(comparison_json(comparison, extra).decode("utf-8"))
        else:  # the decision first: its sentences, its rule, the recommendation or next step
            rest = format_comparison(comparison)
            rest += "".join(
                "\n\n" + "\n".join(printable(line) for line in e["lines"]) for e in spent
            )
            say("\n".join([*lead.lines, "", rest]) if lead.lines else rest)
        return 0

    return _with_selection(args, lambda _db, _sel: 0, show)


def decision_summary(
    path: Path, exp_id: int, db_hint: str | None = None
) -> tuple[list[str], dict[str, Any] | None]:
    """An experiment's decision as `experiment` ends with it: the headline's lines (sentences,
    rule, recommendation or what would decide it) and the record as JSON; nothing for an
    experiment with no candidate to judge."""
    from store import StoreError, connect
    from tuning.present.model import build_model

    try:
        with connect(path, readonly=True) as db:
            model = build_model(db, experiment_ids=[exp_id], with_repeats=True, db_hint=db_hint)
    except (StoreError, ValueError):  # no runs, or nothing to compare
        return [], None
    if not model.comparison.candidates:
        return [], None
    return model.headline.lines, model.extra_json()["decision"]


def compare_experiment(path: Path, exp_id: int) -> int:
    """`compare --db PATH --experiment ID`, for a command that has just run it (demo): called
    directly, not through the CLI's `main` (which imports every command, the caller too)."""
    args = argparse.Namespace(
        db=path,
        run_ids=[],
        experiment=[exp_id],
        baseline=None,
        goodput=None,
        margin=None,
        json=False,
    )
    return _compare(args)


def _chart(args: argparse.Namespace) -> int:
    from tuning.compare.context import comparison_context
    from tuning.present.charts.build import build_chart
    from tuning.present.export import chart_format, write_chart

    out = str(args.out)
    kind = args.kind or DEFAULT_KIND
    if args.kind is None:
        say(
            f"no --kind given: drawing the {kind} comparison (choose with --kind "
            f"{'|'.join(CHART_KINDS)})",
            file=sys.stderr,
        )
    try:
        chart_format(out)
    except ValueError as exc:
        return refused(str(exc))
    if problem := tradeoff.add_search_runs(args):
        return refused(problem)
    if kind == "pareto" and args.fingerprint and not (args.run_ids or args.experiment):
        return tradeoff.pareto_only(args, out)

    def draw(db: Any, selection: Selection) -> int:
        comparison = selection.comparison
        # The file travels alone: it says which model, hardware, vLLM and workload it is of.
        context = comparison_context(selection.runs, comparison).lines()
        if kind in tradeoff.KINDS:
            return tradeoff.draw(args, db, comparison, kind, out, context)
        chart = build_chart(db, comparison, kind, error=args.error, context=context)
        if chart is None:
            say(f"no data for a {kind} chart of these runs", file=sys.stderr)
            return 1
        say(f"wrote {out} ({write_chart(chart, out)})")
        return 0

    return _with_selection(args, draw)


def run(args: argparse.Namespace) -> int:
    """Dispatch `compare` or `chart` (args.command)."""
    return _compare(args) if args.command == "compare" else _chart(args)
