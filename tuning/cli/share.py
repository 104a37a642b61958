"""`tuning-lab export|import|report|publish|team`: sharing run history from a shell.

    export  --db lab.db (--experiment ID | RUN_ID ...) --out FILE.bundle.zip
    export  ... --format benchmark-report|vllm-bench --out FILE.json|DIR
    import  --db lab.db FILE.bundle.zip
    import  --db lab.db RESULT.json|SWEEP_DIR [--param NAME --value V] [--experiment ID]
    report  --db lab.db (--experiment ID | RUN_ID ...) --out FILE.html [--baseline RUN_ID]
    publish --db lab.db (--experiment ID | RUN_ID ...) [--team-folder DIR]
    team    --db lab.db [--import-new] [--team-folder DIR] [--json]

Exit codes: 0 done, 1 nothing to do or partly refused, 2 refused (the message says why).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuning.cli.args import add_db, add_selection, db_path, printable, refused, say
from tuning.cli.field_files import (
    add_field_arguments,
    add_format_argument,
    export_field_files,
    import_field_file,
    is_field_file,
)

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("export", "import", "report", "publish", "team")


def _team_folder(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--team-folder",
        default=None,
        metavar="DIR",
        help="the shared folder (default: the team_folder setting)",
    )


def _include_prompts(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--include-prompts",
        action="store_true",
        help="also the prompt texts of planned traffic (by default only lengths and hashes)",
    )


def add_arguments(sub: Subparsers) -> None:
    """Add export, import, report, publish and team to the CLI's subparsers."""
    exp = sub.add_parser("export", help="selected runs or experiments as one bundle file")
    add_selection(exp)
    exp.add_argument(
        "--out",
        required=True,
        metavar="FILE",
        help="the bundle to write (e.g. ada-runs.bundle.zip); with --format, a .json file for "
        "one run or a folder for several",
    )
    add_format_argument(exp)
    exp.add_argument("--note", default="", help="a line for the manifest")
    _include_prompts(exp)
    imp = sub.add_parser(
        "import",
        help="merge a bundle, or read another tool's result file (vLLM bench JSON or sweep "
        "folder, GuideLLM benchmarks.json, AIPerf profile_export_aiperf.json) into runs of an "
        "experiment (validated first; importing twice adds nothing)",
    )
    imp.add_argument(
        "bundle", type=Path, metavar="FILE", help="a .bundle.zip, a result file or a sweep folder"
    )
    imp.add_argument("--json", action="store_true", help="what was imported, as JSON")
    add_field_arguments(imp)
    add_db(imp)
    rep = sub.add_parser("report", help="one standalone HTML report (opens offline)")
    add_selection(rep)
    rep.add_argument("--out", required=True, metavar="FILE.html")
    rep.add_argument(
        "--baseline",
        type=int,
        action="append",
        default=None,
        metavar="RUN_ID",
        help="baseline run(s) (default: the runs of the first value)",
    )
    rep.add_argument("--title", default=None)
    pub = sub.add_parser("publish", help="write a bundle into the team folder")
    add_selection(pub)
    pub.add_argument("--note", default="")
    _include_prompts(pub)
    _team_folder(pub)
    team = sub.add_parser("team", help="teammates' bundles in the team folder")
    team.add_argument(
        "--import-new", action="store_true", help="import every bundle not imported yet"
    )
    team.add_argument("--json", action="store_true")
    _team_folder(team)
    add_db(team)


def _folder(args: argparse.Namespace) -> str:
    if args.team_folder:
        return str(args.team_folder)
    from tuning.settings import load_settings

    return load_settings().team_folder


def _bundle_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """What `export` and `publish` put in a bundle: the runs named, who shares them, the note."""
    from tuning.settings import load_settings

    settings = load_settings()
    return {
        "author": settings.resolved_author(),
        "host": settings.resolved_host(),
        "run_ids": list(args.run_ids or []),
        "experiment_ids": list(args.experiment or []),
        "note": args.note,
        "include_prompts": args.include_prompts,
    }


def _export(args: argparse.Namespace) -> int:
    from store.bundle import BundleError, export_bundle

    if args.format != "bundle":
        return export_field_files(args)

    try:
        m = export_bundle(db_path(args), args.out, **_bundle_kwargs(args))
    except BundleError as exc:
        return refused(str(exc))
    c = m.counts
    say(
        f"wrote {args.out}: {c['experiments']} experiment(s), {c['runs']} run(s), "
        f"{c['requests']} request rows, {c['samples']} samples (bundle {m.bundle_uid})"
    )
    return 0


def _import(args: argparse.Namespace) -> int:
    from store.bundle import BundleError, import_bundle

    if is_field_file(args.bundle):
        return import_field_file(args)

    try:
        result = import_bundle(db_path(args), args.bundle)
    except BundleError as exc:
        return refused(f"{args.bundle}: {exc}")
    if args.json:
        say(
            json.dumps(
                {
                    "bundle_uid": result.manifest.bundle_uid,
                    "origin": result.manifest.origin,
                    "experiments_added": result.experiments_added,
                    "runs_added": result.runs_added,
                    "runs_known": result.runs_known,
                    "requests_added": result.requests_added,
                    "samples_added": result.samples_added,
                }
            )
        )
    else:
        say(printable(result.describe()))
    return 0


def _report(args: argparse.Namespace) -> int:
    from tuning.present.report import ReportError, write_report

    if not str(args.out).lower().endswith((".html", ".htm")):
        return refused(f"--out must end in .html, got {args.out!r}")
    try:
        out = write_report(
            db_path(args),
            args.out,
            run_ids=args.run_ids or (),
            experiment_ids=args.experiment or (),
            baseline_ids=args.baseline or (),
            title=args.title,
        )
    except ReportError as exc:
        return refused(str(exc))
    say(f"wrote {out}")
    return 0


def _publish(args: argparse.Namespace) -> int:
    from store.bundle import BundleError
    from store.team import TeamError, publish

    try:
        path = publish(db_path(args), _folder(args), **_bundle_kwargs(args))
    except (BundleError, TeamError) as exc:
        return refused(str(exc))
    say(f"published {printable(path)}")
    return 0


def _team(args: argparse.Namespace) -> int:
    from store.team import TeamError, import_new, list_team

    folder = _folder(args)
    try:
        if args.import_new:
            summary = import_new(db_path(args), folder)
            for item in summary.imports:
                if item.result is not None:
                    say(printable(f"imported {item.bundle.name}: {item.result.describe()}"))
                else:
                    say(printable(f"refused {item.bundle.name}: {item.error}"), file=sys.stderr)
            if not summary.imports:
                say("nothing new in the team folder")
            return 1 if summary.refused else 0
        bundles = list_team(folder, db_path(args))
    except TeamError as exc:
        return refused(str(exc))
    if args.json:
        say(json.dumps([_bundle_dict(b) for b in bundles], indent=2))
        return 0
    if not bundles:
        say(f"no bundles in {printable(folder)}")
        return 0
    say(f"{'state':16} {'author@host':28} {'created (UTC)':26} {'exps':>4} {'runs':>5}  file")
    # Names, authors, hosts and errors come from teammates' files: no terminal escapes.
    for b in bundles:
        m = b.manifest
        who = printable(f"{m.author}@{m.host}" if m else "?")
        created = printable(m.created_at if m else "")
        say(
            f"{b.state:16} {who[:28]:28} {created[:26]:26} "
            f"{m.counts['experiments'] if m else 0:>4} {m.counts['runs'] if m else 0:>5}  "
            + printable(f"{b.name}" + (f"  ({b.error})" if b.error else ""))
        )
    return 0


def _bundle_dict(b: Any) -> dict[str, Any]:
    m = b.manifest
    return {
        "file": b.name,
        "state": b.state,
        "error": b.error,
        "author": m.author if m else None,
        "host": m.host if m else None,
        "created_at": m.created_at if m else None,
        "counts": m.counts if m else None,
        "bundle_uid": m.bundle_uid if m else None,
        "runs_present": b.runs_present,
    }


def run(args: argparse.Namespace) -> int:
    """Dispatch one of COMMANDS (args.command)."""
    handler = {
        "export": _export,
        "import": _import,
        "report": _report,
        "publish": _publish,
        "team": _team,
    }.get(args.command)
    return handler(args) if handler else 2
