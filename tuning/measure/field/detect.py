"""Which tool wrote a result file, told from its content, and its runs: a vLLM `bench serve`
JSON, a `bench sweep` folder, a GuideLLM `benchmarks.json` or AIPerf's
`profile_export_aiperf.json` (with `profile_export.jsonl` beside it when there). Every file is
bounded before it is parsed; a file of no known shape is refused in one line naming what was
expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core.json_depth import TooDeep, loads
from tuning.measure.field import aiperf, guidellm, vllm_bench
from tuning.measure.field.run import FieldError, FieldRun

MAX_BYTES = 512 * 1024 * 1024  # a detailed run of 100k requests is well under this
MAX_SWEEP_FILES = 10_000
EXPECTED = (
    "expected a lab bundle (.bundle.zip), a vLLM bench --save-result JSON, a vLLM bench "
    "sweep folder, a GuideLLM benchmarks.json or AIPerf's profile_export_aiperf.json"
)


def load_json(path: Path) -> Any:
    """The JSON of a file, bounded in bytes and nesting; FieldError names the file."""
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise FieldError(
                f"{path}: {size:,} bytes, over the {MAX_BYTES:,} a result file may have"
            )
        return loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, TooDeep) as exc:
        if isinstance(exc, FieldError):
            raise
        raise FieldError(f"{path}: not readable JSON ({exc}); {EXPECTED}") from None


def _sweep(folder: Path) -> list[FieldRun]:
    """Every `run=N.json` under a sweep folder (summary.json repeats them; warm-ups skipped)."""
    files = sorted(folder.rglob("run=*.json"))[: MAX_SWEEP_FILES + 1]
    if len(files) > MAX_SWEEP_FILES:
        raise FieldError(f"{folder}: over {MAX_SWEEP_FILES:,} run files")
    runs = []
    for f in files:
        doc = load_json(f)
        if not vllm_bench.is_vllm_bench(doc):
            raise FieldError(f"{f}: not a vLLM bench result; {EXPECTED}")
        runs.append(vllm_bench.read_run(doc, str(f.relative_to(folder)), f.parent.name))
    if not runs:
        raise FieldError(f"{folder}: no run=N.json under it; {EXPECTED}")
    return runs


def read_field(path: Path) -> tuple[str, list[FieldRun]]:
    """(the format's name, its runs) of a file or sweep folder; FieldError when it is neither."""
    if path.is_dir():
        return "vLLM bench sweep", _sweep(path)
    doc = load_json(path)
    if guidellm.is_guidellm(doc):
        return "GuideLLM benchmarks", guidellm.read_guidellm(doc)
    if aiperf.is_aiperf(doc):
        jsonl = path.with_name("profile_export.jsonl")
        return "AIPerf profile export", [
            aiperf.read_aiperf(doc, jsonl if jsonl.is_file() else None)
        ]
    if vllm_bench.is_vllm_bench(doc):
        return "vLLM bench result", [vllm_bench.read_run(doc, path.name)]
    raise FieldError(f"{path}: no known result format; {EXPECTED}")
