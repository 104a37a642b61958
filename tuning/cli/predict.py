"""`tuning-lab predict --param NAME --values V1,V2 [--set NAME=VALUE] [--json]`: the KV cache
each value would get (bytes per token, budget, blocks, tokens, concurrency at max-model-len) from
the model's config.json, before anything restarts; values that cannot start are flagged."""

from __future__ import annotations

import argparse
import json
import math
from typing import TYPE_CHECKING, Any

from tuning.cli.args import refused, say

if TYPE_CHECKING:
    from tuning.cli.args import Subparsers
    from tuning.engine.predict import Prediction

COMMANDS = ("predict",)


def add_arguments(sub: Subparsers) -> None:
    p = sub.add_parser("predict", help="the KV cache each value would get, before any restart")
    p.add_argument("--param", required=True)
    p.add_argument("--values", required=True, help="comma-separated, e.g. 2M,1G")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="baseline server parameter")
    p.add_argument(
        "--model-config",
        default=None,
        metavar="PATH",
        help="the model's config.json (default: the configured engine's model folder)",
    )
    p.add_argument(
        "--device-memory-gib",
        type=float,
        default=None,
        metavar="GIB",
        help="GPU memory for gpu-memory-utilization (default: what NVML says, if anything)",
    )
    p.add_argument("--json", action="store_true")


def device_bytes(gib: float | None) -> int | None:
    """The first GPU's memory: given, or from NVML (None on a machine without one). A given value
    that is not a finite number over 0 (`nan`, `inf`, `-4`) raises ValueError naming the flag."""
    if gib is not None:
        if not math.isfinite(gib) or gib <= 0:
            raise ValueError(f"--device-memory-gib {gib}: must be a finite number of GiB over 0")
        return int(gib * 2**30)
    from tuning.engine.hardware import hardware_details

    gpus = hardware_details().get("gpus") or []
    return int(gpus[0]["memory_total_bytes"]) if gpus else None


def format_predictions(param: str, rows: list[Prediction]) -> str:
    lines = [
        f"{param:>24} {'bytes/token':>11} {'block':>5} {'KV budget':>12} {'blocks':>9} "
        f"{'KV tokens':>11} {'max conc.':>9}  starts?"
    ]

    def num(value: Any, spec: str = "{:,}") -> str:
        return "?" if value is None else spec.format(value)

    for r in rows:
        budget = None if r.budget_bytes is None else f"{r.budget_bytes / 2**20:,.1f} MiB"
        lines.append(
            f"{r.value:>24} {r.bytes_per_token:>11,} {r.block_size:>5} {budget or '?':>12} "
            f"{num(r.kv_blocks):>9} {num(r.kv_tokens):>11} "
            f"{num(r.max_concurrency, '{:.2f}x'):>9}  {'yes' if r.can_start else 'NO'}"
        )
        lines += [f"{'':>26}cannot start: {p}" for p in r.problems]
        lines += [f"{'':>26}warning: {w}" for w in r.warnings]
    if rows:
        mml = rows[0].max_model_len
        lines.append(
            f"KV budget: {rows[0].budget_source}; max conc. = KV blocks / blocks of one "
            f"max-model-len ({mml if mml is not None else '?'}) request"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from tuning.cli.server import parse_sets
    from tuning.engine.current import current_spec
    from tuning.engine.params import ParamError
    from tuning.engine.predict import ModelShape, predict_values
    from tuning.engine.validate import parse_values, validate_config

    try:
        spec = current_spec()
        values = parse_values(args.param, args.values)
        base = validate_config({**spec.baseline, **parse_sets(args.set)}, spec.backend)
        shape = ModelShape.load(args.model_config or spec.model)
        device = device_bytes(args.device_memory_gib)
    except FileNotFoundError as exc:  # the page says it in its own words; here, the flag
        return refused(f"{exc}: give --model-config")
    except (ParamError, ValueError, OSError, KeyError) as exc:
        return refused(str(exc))
    rows = predict_values(
        args.param,
        values,
        base,
        shape,
        backend=spec.backend,
        env=spec.env,
        device_bytes=device,
    )
    if args.json:
        say(json.dumps({"param": args.param, "values": [r.to_json() for r in rows]}, indent=2))
    else:
        say(format_predictions(args.param, rows))
    return 0
