"""`tuning-lab demo`: the home page's "Run the demo" from a shell: max-num-seqs 2 vs
16 on the embedded engine, repeated until decided, then the comparison with its verdicts."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from tuning.cli.args import add_db, db_path, refused, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers

COMMANDS = ("demo",)


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser(
        "demo",
        help="the demo: max-num-seqs 2 vs 16 on the embedded engine, repeated until decided "
        "(most of its time is the engine's starts; README: how long it took)",
    )
    add_db(p)


def run(args: argparse.Namespace) -> int:
    from tuning.cli.compare import compare_experiment
    from tuning.cli.experiment import _run_stored
    from tuning.engine.current import current_spec
    from tuning.engine.spec import EngineError
    from tuning.experiment.demo import plan_demo
    from tuning.settings import load_settings

    settings = load_settings()
    path = db_path(args)
    try:
        spec = current_spec(settings)
        exp_id = plan_demo(
            path, spec, author=settings.resolved_author(), host=settings.resolved_host()
        )
    except (EngineError, ValueError) as exc:
        return refused(str(exc))
    say(f"demo: experiment {exp_id}, max-num-seqs 2 vs 16, repeated until decided", flush=True)

    def progress(event: str, data: dict[str, object]) -> None:
        if event == "run_done":
            say(f"  run {data['run_id']} done ({data['done']} of {data['total']})", flush=True)
        elif event == "repeats" and not data["stop"]:
            say(f"  repeat until decided: {data['reason']}", flush=True)

    code, _ = _run_stored(path, exp_id, progress)
    if code != 0:
        return code
    sys.stdout.flush()
    return compare_experiment(path, exp_id)
