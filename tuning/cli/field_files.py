"""`tuning-lab import RESULT` for the field's result files (vLLM bench JSON or sweep folder,
GuideLLM, AIPerf: tuning.experiment.imported) and `tuning-lab export --format
benchmark-report|vllm-bench` (tuning.present.field): the arguments and their handlers."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

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


def is_field_file(path: Path) -> bool:
    """A sweep folder, or a file that is not a bundle (a bundle is a zip: named .zip or starting
    with the zip signature, so a truncated one still gets the bundle's refusal)."""
    if path.is_dir():
        return True
    if not path.is_file() or path.suffix.lower() == ".zip":
        return False
    try:
        with path.open("rb") as f:
            return f.read(2) != b"PK"
    except OSError:
        return False


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


FORMATS = ("bundle", "benchmark-report", "vllm-bench")


def add_format_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="bundle",
        help="bundle: the lab's own (default); benchmark-report: llm-d Benchmark Report v0.2.1, "
        "one per run; vllm-bench: vLLM's bench serve --save-result JSON (several runs: a "
        "bench sweep folder that `vllm bench sweep plot` reads)",
    )


def _selected(db: Any, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The measured runs named (and those of the experiments named), in order."""
    from core.status import MEASURED
    from store import queries

    ids = list(dict.fromkeys(int(i) for i in args.run_ids or []))
    for eid in args.experiment or []:
        ids += [i for i in queries.experiment_run_ids(db, eid) if i not in ids]
    return [r for r in queries.load_runs(db, ids) if r.get("status") in MEASURED]


def _kv_mean(db: Any, run_id: int) -> float | None:
    """The mean of a run's KV-cache usage samples (a fraction), or None without any."""
    from store.timeseries import get_samples

    values = [float(r["value"]) for r in get_samples(db, run_id, ["kv_cache_usage_perc"])]
    return sum(values) / len(values) if values else None


def _write(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str, allow_nan=False) + "\n")


def export_field_files(args: argparse.Namespace) -> int:
    """Write the runs named as Benchmark Reports or vLLM bench JSON (one run: the file --out;
    several: files under the folder --out)."""
    from store import StoreError, queries
    from store.db import connect
    from tuning.cli.version import lab_version
    from tuning.present.field.benchmark_report import benchmark_report
    from tuning.present.field.vllm_bench import bench_result, sweep_files

    out = Path(args.out)
    if not (args.run_ids or args.experiment):
        return refused("name runs or --experiment ID to export")
    try:
        with connect(db_path(args), readonly=True) as db:
            runs = _selected(db, args)
            if not runs:
                return refused("no measured run among those named")
            single = len(runs) == 1 and not args.experiment
            if single and out.suffix != ".json":
                return refused(f"--out {out}: one run is written to a .json file")
            if not single and out.suffix:
                return refused(f"--out {out}: several runs are written to a folder, not a file")
            if args.format == "benchmark-report":
                uids = {
                    int(r["experiment_id"]): queries.get_experiment(db, int(r["experiment_id"]))[
                        "uid"
                    ]
                    for r in runs
                    if r.get("experiment_id")
                }
                version = lab_version()  # its package metadata; "unknown" uninstalled
                version = "unknown" if version.startswith("unknown") else version
                files: dict[str, Any] = {
                    f"run-{r['id']}.json": benchmark_report(
                        r,
                        uids.get(int(r["experiment_id"] or 0)),
                        tool_version=version,
                        kv_mean=_kv_mean(db, int(r["id"])),
                    )
                    for r in runs
                }
            else:
                pairs = [(r, queries.get_requests(db, int(r["id"])) or None) for r in runs]
                files = {"": bench_result(*pairs[0])} if single else sweep_files(pairs)
    except (StoreError, ValueError) as exc:
        return refused(str(exc))
    for rel, doc in files.items():
        _write(out if single else out / rel, doc)
    say(f"wrote {out}: {len(runs)} run(s) as {args.format}")
    return 0
