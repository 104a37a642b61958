"""`tuning-lab import RESULT` for the field's result files (vLLM bench JSON or sweep folder,
GuideLLM, AIPerf: tuning.experiment.imported) and `tuning-lab export --format
benchmark-report|vllm-bench` (tuning.present.field): the arguments and their handlers."""

from __future__ import annotations

import argparse
import json

from tuning.cli.args import db_path, printable, refused, say


def add_field_arguments(p: argparse.ArgumentParser) -> None:
    """--param, --value, --experiment of `import` (result files only; a bundle needs none)."""
    p.add_argument(
        "--param",
        default=None,
        metavar="NAME",
        help="result files only: the server flag the runs differ in (e.g. max-num-seqs); "
        "needed when the file does not hold the server's flags",
    )
    p.add_argument(
        "--value",
        default=None,
        metavar="V",
        help="result files only: that flag's value on the server the file measured",
    )
    p.add_argument(
        "--experiment",
        type=int,
        default=None,
        metavar="ID",
        help="result files only: add the runs to this experiment of imported runs (another "
        "value of the same flag) instead of a new one",
    )


def import_field_file(args: argparse.Namespace) -> int:
    """Read a result file into runs; a refusal comes before any write."""
    from tuning.experiment.imported import ImportError_, import_field
    from tuning.settings import load_settings

    settings = load_settings()
    try:
        result = import_field(
            db_path(args),
            args.bundle,
            param=args.param,
            value=args.value,
            experiment_id=args.experiment,
            author=settings.resolved_author(),
            host=settings.resolved_host(),
        )
    except ImportError_ as exc:
        return refused(str(exc))
    if args.json:
        say(
            json.dumps(
                {
                    "format": result.format,
                    "experiment_id": result.experiment_id,
                    "runs_added": result.runs_added,
                    "runs_known": result.runs_known,
                }
            )
        )
    else:
        say(printable(result.describe()))
    return 0
