"""`tuning-lab doctor [--json]`: one line per check, a fix under each problem; exit 1 when
there is a problem. The JSON also names the vLLM found (saved, VLLM_PYTHON, PATH) and the GPUs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from tuning.cli.args import add_db, db_path, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("doctor",)


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser("doctor", help="is this machine ready: engine, GPU, port, disk, DB, team")
    p.add_argument("--json", action="store_true", help="the findings as a JSON list")
    p.add_argument("--port", type=int, default=None, help="the app's port to check (default 8501)")
    p.add_argument(
        "--no-import", action="store_true", help="skip importing vLLM (seconds on a busy CPU box)"
    )
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from tuning.engine.doctor import APP_PORT, diagnose
    from tuning.engine.find import find_vllm, read_gpus
    from tuning.settings import load_settings

    settings = load_settings()
    findings = diagnose(
        settings, db_path=db_path(args), port=args.port or APP_PORT, import_check=not args.no_import
    )
    problems = [f for f in findings if not f.ok]
    if args.json:
        found = find_vllm(settings)  # what `make run` would use: saved, VLLM_PYTHON, PATH
        report = {
            "ok": not problems,
            "findings": [f.to_dict() for f in findings],
            "vllm": found.found.to_dict() if found.found else None,
            "vllm_not_used": found.notes,
            "gpus": read_gpus().to_dict(),
        }
        say(json.dumps(report))
    else:
        for finding in findings:
            say(finding.line())
        say(f"{len(problems)} problem(s)" if problems else "no problems found")
    return 1 if problems else 0
