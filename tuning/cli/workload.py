"""`tuning-lab workload preview|save|list` (the traffic flags:
tuning.measure.traffic.options).

    tuning-lab workload preview --dataset workloads/chat-500.sharegpt.json --multi-turn
    tuning-lab workload preview --spec my-spec.json --json
    tuning-lab workload save chat --spec my-spec.json
    tuning-lab experiment --param request-rate --values 2,4,8 --workload chat

A spec file is the JSON of `WorkloadSpec.to_dict()`; a name is a workload saved in the lab's DB.
Without any traffic flag, `bench` and `experiment` keep the classic fixed-length closed loop.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from tuning.cli.args import add_db, db_path, printable, refused, say
from tuning.measure.traffic import TrafficError
from tuning.measure.traffic.arrival import span_text
from tuning.measure.traffic.options import DEFAULT_TURNS, TrafficOptions, load_spec
from tuning.measure.traffic.spec import FILE_KINDS

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("workload",)


def add_arguments(sub: Subparsers) -> None:
    wl = sub.add_parser("workload", help="preview, save and list real-traffic workloads")
    inner = wl.add_subparsers(dest="workload_command", required=True)
    pv = inner.add_parser("preview", help="what a workload will send, before any run")
    src = pv.add_mutually_exclusive_group(required=True)
    src.add_argument("--spec", default=None, help="a spec JSON file, or a saved workload's name")
    src.add_argument("--dataset", default=None)
    pv.add_argument("--dataset-format", choices=list(FILE_KINDS), default=None)
    pv.add_argument("--num-requests", type=int, default=None, help="default: the whole file")
    pv.add_argument("--concurrency", type=int, default=1)
    pv.add_argument("--seed", type=int, default=0)
    for flag in ("--request-rate", "--max-concurrency"):
        pv.add_argument(flag, type=float if "rate" in flag else int, default=None)
    pv.add_argument("--burstiness", type=float, default=1.0)
    pv.add_argument("--multi-turn", type=int, nargs="?", const=DEFAULT_TURNS, default=None)
    pv.add_argument("--think-time", type=float, default=0.0)
    pv.add_argument("--trace-speed", type=float, default=1.0)
    pv.add_argument(
        "--tokenizer",
        default=None,
        metavar="FILE",
        help="tokenizer.json (or its folder) that counts the tokens (default: the model's)",
    )
    pv.add_argument(
        "--model",
        default=None,
        help="the model whose tokenizer counts the tokens: a local folder or a Hugging Face id "
        "in this machine's cache, never downloaded (default: the configured engine's model; the "
        "embedded engine's own tokenizer when that is the engine)",
    )
    pv.add_argument("--json", action="store_true")
    add_db(pv)
    sv = inner.add_parser("save", help="save a spec under a name, to reuse with --workload NAME")
    sv.add_argument("name")
    sv.add_argument("--spec", required=True, help="a spec JSON file")
    add_db(sv)
    ls = inner.add_parser("list", help="the saved workloads")
    add_db(ls)


def _tokenizer(args: argparse.Namespace) -> Any:
    """The tokenizer that counts the preview's tokens (tuning.measure.traffic.tokenizer_choice)."""
    from tuning.measure.traffic.tokenizer_choice import preview_tokenizer

    return preview_tokenizer(args.tokenizer, args.model)


def _preview(args: argparse.Namespace) -> int:
    from tuning.measure.traffic import fingerprint, materialize, preview
    from tuning.measure.traffic.workload import WorkloadError

    try:
        spec = TrafficOptions.from_cli_args(args, workload=args.spec).to_spec(db_path(args))
        assert spec is not None  # --spec or --dataset is required
        plan = materialize(spec, _tokenizer(args))
    except (TrafficError, WorkloadError) as exc:
        return refused(str(exc))
    out = preview(plan)
    out["fingerprint"] = fingerprint(plan)
    out["spec"] = spec.to_dict()
    if args.json:
        say(json.dumps(out, indent=1))
        return 0
    say(render_preview(out))
    return 0


def render_preview(p: dict[str, Any]) -> str:
    """The preview as a few lines of text (never a prompt's words)."""
    a, t, sh = p["arrival"], p["turns"], p["prefix_sharing"]
    lines = [
        f"source        {p['source']}  fingerprint {p['fingerprint']}",
        f"requests      {p['requests']} in {p['conversations']} conversations "
        f"(turns mean {t['mean']:.2f}, max {t['max']}, multi-turn {t['multi_turn_conversations']})",
        f"tokens        input {p['tokens']['input']:,}  output {p['tokens']['output']:,}",
    ]
    for key in ("input_len", "output_len"):
        h = p[key]
        lines.append(
            f"{key:<13} mean {h['mean']:.1f}  p50 {h.get('p50', 0):.0f}  p90 {h.get('p90', 0):.0f}"
            f"  min {h['min']}  max {h['max']}"
        )
    lines.append(
        f"prefix cache  {sh['reusable_tokens']:,} reusable input tokens "
        f"({100 * sh['reusable_share']:.1f}%), {sh['prefixes']} shared prefixes"
    )
    if a["kind"] == "closed":
        lines.append(f"arrival       closed loop, concurrency {a['concurrency']}")
    else:
        rate = f"target {a['target_rate']:g} req/s, " if a.get("target_rate") else ""
        how = a.get("pattern") or f"x{a['speed']:g}"
        lines.append(
            f"arrival       {a['kind']} {how}: {rate}planned {a['rate']:.2f} "
            f"req/s over {a['duration_s']:.1f} s, gap CV {a['cv']:.2f}, "
            f"max concurrency {a['max_concurrency'] or 'none'}"
        )
    lines.append(
        f"schedule      planned at least {span_text(a['planned_s'])} "
        f"(starts and think time; cap {span_text(a['cap_s'])})"
    )
    lines.append(
        f"skipped       {p['skipped']} entries, {p['truncated_turns']} turns cut, "
        f"{p['oversampled']} oversampled"
    )
    return "\n".join(lines)


def _save(args: argparse.Namespace) -> int:
    from store import connect, repo
    from tuning.measure.traffic.fingerprint import spec_digest
    from tuning.settings import load_settings

    try:
        spec = load_spec(args.spec)
    except TrafficError as exc:
        return refused(str(exc))
    settings = load_settings()
    with connect(db_path(args)) as db:
        wid = repo.save_workload(
            db,
            args.name,
            spec.to_dict(),
            spec_digest(spec),
            author=settings.resolved_author(),
            host=settings.resolved_host(),
        )
    say(f"workload {args.name!r} saved (id {wid}, spec {spec_digest(spec)})")
    return 0


def _list(args: argparse.Namespace) -> int:
    from store import connect, queries

    with connect(db_path(args)) as db:
        rows = queries.list_workloads(db)
    for r in rows:
        spec = r.get("spec") or {}
        arrival = (spec.get("arrival") or {}).get("kind", "?")
        source = (spec.get("source") or {}).get("kind", "?")
        stored = (r["name"], source, arrival, r["spec_fingerprint"], r["updated_at"])
        # a name from a DB or a bundle: one line, no escape sequence
        name, source, arrival, digest, updated = (printable(x) for x in stored)
        say(f"{name:24} {source:10} {arrival:7} {digest}  {updated}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.workload_command == "preview":
        return _preview(args)
    if args.workload_command == "save":
        return _save(args)
    return _list(args)
