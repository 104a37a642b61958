"""`python -m tuning workload preview|save|list`, and the traffic flags of `bench` and `experiment`.

    python -m tuning workload preview --dataset workloads/chat-500.sharegpt.json --multi-turn
    python -m tuning workload preview --spec my-spec.json --json
    python -m tuning workload save chat --spec my-spec.json
    python -m tuning experiment --param request-rate --values 2,4,8 --workload chat

A spec file is the JSON of `WorkloadSpec.to_dict()`; a name is a workload saved in the lab's DB.
Without any traffic flag, `bench` and `experiment` keep the classic fixed-length closed loop.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuning.cli.args import add_db, db_path, refused
from tuning.traffic import (
    Arrival,
    LengthDist,
    MultiTurn,
    SharedPrefixes,
    Source,
    TrafficError,
    WorkloadSpec,
)
from tuning.traffic.arrival import ScheduleTooLong, span_text
from tuning.traffic.bounded import read_prefix
from tuning.traffic.materialize import check
from tuning.traffic.spec import FILE_KINDS, read_spec

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("workload",)
# --multi-turn without a number: turns per synthetic conversation.
DEFAULT_TURNS = 3


def add_traffic_arguments(p: argparse.ArgumentParser) -> None:
    """Real-traffic flags; none given keeps the classic workload (the other workload flags)."""
    g = p.add_argument_group("traffic (tuning.traffic)")
    g.add_argument("--workload", default=None, help="a spec JSON file, or a saved workload's name")
    g.add_argument("--dataset", default=None, help="a data file (workloads/ is searched too)")
    g.add_argument("--dataset-format", choices=list(FILE_KINDS), default=None)
    g.add_argument(
        "--request-rate", type=float, default=None, help="open loop: requests per second"
    )
    g.add_argument("--burstiness", type=float, default=1.0, help="gamma shape; 1 = Poisson")
    g.add_argument(
        "--max-concurrency", type=int, default=None, help="open loop / trace: in-flight cap"
    )
    g.add_argument(
        "--multi-turn",
        type=int,
        nargs="?",
        const=DEFAULT_TURNS,
        default=None,
        metavar="TURNS",
        help=f"conversations (synthetic: TURNS turns each, default {DEFAULT_TURNS})",
    )
    g.add_argument("--think-time", type=float, default=0.0, help="seconds between turns")
    g.add_argument("--trace-speed", type=float, default=1.0, help="trace replay speed factor")


def guess_format(path: str) -> str:
    """sharegpt for .json, csv for .csv, trace for a JSONL whose first line has a timestamp."""
    lower = path.lower()
    if lower.endswith(".json"):
        return "sharegpt"
    if lower.endswith(".csv"):
        return "csv"
    first = read_prefix(_resolve(path)).split("\n", 1)[0]  # a bounded sniff, never the file
    return "trace" if '"timestamp"' in first else "jsonl"


def _resolve(path: str) -> str:
    from tuning.settings import REPO_ROOT

    if Path(path).exists():
        return path
    shipped = REPO_ROOT / "workloads" / path
    return str(shipped) if shipped.exists() else path


def load_spec(ref: str, db: Path | None = None) -> WorkloadSpec:
    """A spec file (JSON), or the name of a workload saved in the DB."""
    if Path(ref).is_file():
        return read_spec(ref)
    from store import connect, queries

    if db is not None and db.exists():
        with connect(db, readonly=True) as conn:
            row = queries.get_workload(conn, ref)
        if row is not None:
            return WorkloadSpec.from_dict(row["spec"])
    raise TrafficError(f"{ref!r} is neither a spec file nor a saved workload (workload list)")


def _arg(args: argparse.Namespace, name: str, default: Any = None) -> Any:
    return getattr(args, name, default)


# Number flags and the least each takes (strictly more for rates and factors); NaN and inf never.
_NUMBER_FLAGS = (
    ("--request-rate", "request_rate", True),
    ("--burstiness", "burstiness", True),
    ("--trace-speed", "trace_speed", True),
    ("--think-time", "think_time", False),
)
# The flag that set a spec field a schedule refusal names.
_FIELD_FLAGS = {"arrival.rate": "--request-rate", "arrival.speed": "--trace-speed"}


def _check_number_flags(args: argparse.Namespace) -> None:
    for flag, name, strict in _NUMBER_FLAGS:
        value = _arg(args, name)
        if value is None:
            continue
        if not math.isfinite(value) or value < 0 or (strict and value == 0):
            sign = ">" if strict else ">="
            raise TrafficError(f"{flag} must be a finite number {sign} 0, got {value}")


def spec_from_args(args: argparse.Namespace, db: Path | None = None) -> WorkloadSpec | None:
    """The spec the flags describe, or None for the classic workload (no traffic flag given).

    Its data file is read and its schedule's length checked here (`traffic.check`), so a bad file
    or a schedule of years is refused at the flag, before a run is planned or an endpoint asked.
    """
    _check_number_flags(args)
    spec = _spec_from_args(args, db)
    if spec is None:
        return None
    try:
        check(spec)
    except ScheduleTooLong as exc:
        flag = _FIELD_FLAGS.get(exc.field, "")
        value = _arg(args, flag[2:].replace("-", "_"))
        raise TrafficError(f"{flag} {value:g}: {exc.detail}" if value else str(exc)) from None
    return spec


def _spec_from_args(args: argparse.Namespace, db: Path | None = None) -> WorkloadSpec | None:
    rate = _arg(args, "request_rate")
    if rate is None and _arg(args, "param", "") in ("request-rate", "burstiness"):
        rate = 1.0  # the runner sets each value; the arrival must be an open loop
    turns = _arg(args, "multi_turn")
    num = _arg(args, "num_requests")
    if _arg(args, "workload"):
        spec = load_spec(args.workload, db)
    elif _arg(args, "dataset"):
        kind = _arg(args, "dataset_format") or guess_format(args.dataset)
        spec = WorkloadSpec(
            source=Source(kind, _resolve(args.dataset)),
            input=None,
            output=None,
            num_requests=num,
            seed=_arg(args, "seed", 0),
        )
    elif rate is not None or turns is not None:
        prefix = _arg(args, "shared_prefix_len", 0) or 0
        spec = WorkloadSpec(
            input=LengthDist(mean=args.input_len),
            output=LengthDist(mean=args.output_len),
            prefixes=SharedPrefixes(1, prefix) if prefix else SharedPrefixes(),
            num_requests=num or 64,
            seed=_arg(args, "seed", 0),
        )
    else:
        return None
    kind = spec.source.kind
    cap = _arg(args, "max_concurrency")
    if rate is not None:
        burst = _arg(args, "burstiness", 1.0)
        arrival = Arrival("open", rate=rate, burstiness=burst, max_concurrency=cap)
    elif kind == "trace" and not _arg(args, "workload"):
        arrival = Arrival("trace", speed=_arg(args, "trace_speed", 1.0), max_concurrency=cap)
    elif not _arg(args, "workload"):
        arrival = Arrival("closed", concurrency=_arg(args, "concurrency", 1) or 1)
    else:
        arrival = spec.arrival
    changes: dict[str, Any] = {"arrival": arrival}
    if turns is not None:
        dist = LengthDist(mean=turns) if kind == "synthetic" else None
        changes["multi_turn"] = MultiTurn(True, dist, _arg(args, "think_time", 0.0))
    data = {**spec.to_dict(), **{k: _plain(v) for k, v in changes.items()}}
    return WorkloadSpec.from_dict(data)


def _plain(value: Any) -> Any:
    from tuning.traffic.spec import _to_plain

    return _to_plain(value)


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
    pv.add_argument("--tokenizer", default=None, help="tokenizer.json (default: embedded model)")
    pv.add_argument("--json", action="store_true")
    add_db(pv)
    sv = inner.add_parser("save", help="save a spec under a name, to reuse with --workload NAME")
    sv.add_argument("name")
    sv.add_argument("--spec", required=True, help="a spec JSON file")
    add_db(sv)
    ls = inner.add_parser("list", help="the saved workloads")
    add_db(ls)


def _tokenizer(path: str | None) -> Any:
    from tuning.engine import model_dir
    from tuning.workload import LocalTokenizer

    return LocalTokenizer(path or model_dir())


def _preview(args: argparse.Namespace) -> int:
    from tuning.traffic import fingerprint, materialize, preview
    from tuning.workload import WorkloadError

    args.workload = args.spec
    try:
        spec = spec_from_args(args, db_path(args))
        assert spec is not None
        plan = materialize(spec, _tokenizer(args.tokenizer))
    except (TrafficError, WorkloadError) as exc:
        return refused(str(exc))
    out = preview(plan)
    out["fingerprint"] = fingerprint(plan)
    out["spec"] = spec.to_dict()
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print(render_preview(out))
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
    from tuning.settings import load_settings
    from tuning.traffic.fingerprint import spec_digest

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
    print(f"workload {args.name!r} saved (id {wid}, spec {spec_digest(spec)})")
    return 0


def _list(args: argparse.Namespace) -> int:
    from store import connect, queries

    with connect(db_path(args)) as db:
        rows = queries.list_workloads(db)
    for r in rows:
        spec = r.get("spec") or {}
        arrival = (spec.get("arrival") or {}).get("kind", "?")
        source = (spec.get("source") or {}).get("kind", "?")
        print(f"{r['name']:24} {source:10} {arrival:7} {r['spec_fingerprint']}  {r['updated_at']}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.workload_command == "preview":
        return _preview(args)
    if args.workload_command == "save":
        return _save(args)
    return _list(args)
